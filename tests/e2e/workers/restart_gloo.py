"""Attempt 0: every rank joins the process group and all_reduces, leaves a key in the store, then
rank 1 fails. Attempt 1 must start clean and succeed: torch 1.13 namespaces the agent store's
keys per attempt, torch 2.x does not (the agent gives each attempt a fresh key space), so no
key of attempt 0 may be visible."""
import os
import sys

import torch
import torch.distributed as dist

import torch_quirks  # noqa: F401  (Debian's torch 2.6 without libuv; see the module)

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1) * (attempt + 1)
dist.all_reduce(t)
rank = dist.get_rank()
store = dist.distributed_c10d._get_default_store()
stale = f"left_by_attempt_0_rank_{rank}"
if attempt == 0:
    store.set(stale, "stale")
else:
    # Absent: compare_set with an empty expected value creates it and returns what it stored.
    assert store.compare_set(stale, "", "fresh") == b"fresh", f"attempt {attempt} sees {stale}"
if attempt == 0 and rank == 1:
    print("rank 1 fails in attempt 0", flush=True)
    sys.exit(3)
if attempt == 0:
    dist.barrier()  # blocks until the agent stops this rank
print(f"attempt {attempt} rank {rank} allreduce={t.item():.0f}", flush=True)
