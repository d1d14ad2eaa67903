# A lock-step worker that reports its own work per step the way README's "Stragglers" tells a
# Python script to: the seconds of its step that do not wait for the other ranks, ADDed to
# $ACCEL_WORK_KEY before the step's heartbeat. Each step it "works" (sleeps) BASE_S seconds —
# rank SLOW_RANK SLOWDOWN times as long — then waits for the others in a barrier, as an
# all-reduce would make it. It stops once the file DONE exists (or after MAX_STEPS).
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
base = float(os.environ.get("BASE_S", "0.02"))
work_s = base * (float(os.environ["SLOWDOWN"]) if rank == int(os.environ["SLOW_RANK"]) else 1.0)
hb = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
done = os.environ["DONE"]
for step in range(int(os.environ.get("MAX_STEPS", "3000"))):
    t0 = time.perf_counter()
    time.sleep(work_s)  # the step's own work
    hb.add(os.environ["ACCEL_WORK_KEY"], int((time.perf_counter() - t0) * 1e6))
    hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)
    dist.barrier()  # lock-step: every rank waits for the slowest
    flag = [os.path.exists(done)]
    dist.broadcast_object_list(flag, src=0)  # all ranks stop at the same step
    if flag[0]:
        break
print(f"rank {rank} stopped after step {step}")
dist.destroy_process_group()
