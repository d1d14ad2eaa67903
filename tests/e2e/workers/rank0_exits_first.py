"""Rank 0 leaves right after a collective while the others keep using the job's store. With a
rank-0-hosted store they would fail; with the agent's store they finish."""
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_quirks  # noqa: F401  (Debian's torch 2.6 without libuv; see the module)

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.ones(2)
dist.all_reduce(t)
assert t[0].item() == world
if rank == 0:
    print("rank 0 leaving", flush=True)
    os._exit(0)

time.sleep(1.0)  # rank 0 is gone by now
store = dist.distributed_c10d._get_default_store()
store.set(f"late{rank}", str(rank))
n = store.add("late_count", 1)
store.wait([f"late{r}" for r in range(1, world)])
print(f"rank {rank} used the store after rank 0 left ({n})", flush=True)
