"""One rank of scripts/bench/allreduce.sh on python3-torch's Gloo: run under
`accel launch --cpu -n N`. Same sizes and timing rule as allreduce_bench.cc; prints on rank 0
"allreduce pygloo <bytes> <microseconds per op>"."""
import sys
import time

import torch
import torch.distributed as dist


def time_one(nbytes, min_seconds):
    t = torch.ones(nbytes // 4, dtype=torch.float32)
    for _ in range(3):
        dist.all_reduce(t)
    iterations = 1
    while True:
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(t)
        seconds = time.perf_counter() - start
        enough = torch.tensor([1 if seconds >= min_seconds else 0], dtype=torch.int32)
        dist.broadcast(enough, 0)  # rank 0 decides, so every rank runs the same count
        if enough.item() == 1:
            return seconds / iterations * 1e6
        iterations *= 2


def main():
    min_seconds = float(sys.argv[sys.argv.index("--min-seconds") + 1]) if "--min-seconds" in sys.argv else 0.2
    dist.init_process_group("gloo")
    nbytes = 1024
    while nbytes <= 64 << 20:
        us = time_one(nbytes, min_seconds)
        if dist.get_rank() == 0:
            print(f"allreduce pygloo {nbytes} {us:.1f}", flush=True)
        nbytes *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
