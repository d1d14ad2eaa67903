"""One store, two torch generations (run with workers/mixed_python: even ranks torch 1.13, odd
ranks torch 2.6). Every rank counts itself in, publishes its torch version, waits for everyone
and reads every other rank's key, so each generation reads what the other wrote."""
import datetime
import os

import torch

from torch_quirks import tcp_store

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
s = tcp_store(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, False, datetime.timedelta(seconds=30))
s.add("arrived", 1)  # before the version: every version present means every rank counted
s.set(f"version/{rank}", torch.__version__)
s.wait([f"version/{r}" for r in range(world)])
versions = [s.get(f"version/{r}").decode() for r in range(world)]
assert s.add("arrived", 0) == world
assert s.compare_set("first", "", str(rank)) in [str(r).encode() for r in range(world)]
print(f"rank {rank} (torch {torch.__version__}) read versions {versions}", flush=True)
