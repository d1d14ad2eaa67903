# A lock-step worker that reports its own work per step the way README's "Stragglers" tells a
# Python script to: the seconds of its step that do not wait for the other ranks, ADDed to
# $ACCEL_WORK_KEY before the step's heartbeat. Each step it works, then waits for the others in an
# all-reduce, as data-parallel training does. The work is either a sleep of BASE_S seconds — rank
# SLOW_RANK's SLOWDOWN times as long — or, with WORK_ITERS set, that many 128x128 matrix products
# on the CPU (the same on every rank: a slow rank is one whose CPU is slow). It stops once the file
# DONE exists (or after MAX_STEPS). With STEPS_FILE set, rank 0 appends "STEP world=W t=SECONDS" to
# it at every step.
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
iters = int(os.environ.get("WORK_ITERS", "0"))
base = float(os.environ.get("BASE_S", "0.02"))
slow = rank == int(os.environ.get("SLOW_RANK", "-1"))
sleep_s = base * (float(os.environ.get("SLOWDOWN", "1")) if slow else 1.0)
a, b = torch.randn(128, 128), torch.randn(128, 128)
hb = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
done, steps_file = os.environ["DONE"], os.environ.get("STEPS_FILE")
for step in range(int(os.environ.get("MAX_STEPS", "3000"))):
    t0 = time.perf_counter()
    if iters:
        for _ in range(iters):
            torch.mm(a, b)
    else:
        time.sleep(sleep_s)
    hb.add(os.environ["ACCEL_WORK_KEY"], int((time.perf_counter() - t0) * 1e6))
    hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)
    flag = torch.tensor([1.0 if os.path.exists(done) else 0.0])
    dist.all_reduce(flag)  # lock-step: every rank waits for the slowest; all stop at one step
    if rank == 0 and steps_file:
        with open(steps_file, "a") as f:
            f.write(f"{step + 1} world={world} t={time.time():.3f}\n")
    if flag.item() > 0:
        break
print(f"rank {rank} stopped after step {step}")
dist.destroy_process_group()
