"""Attempt 0: every rank joins the process group and all_reduces, then rank 1 fails. Attempt 1
must start clean (torch namespaces the agent store's keys per attempt) and succeed."""
import os
import sys

import torch
import torch.distributed as dist

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1) * (attempt + 1)
dist.all_reduce(t)
rank = dist.get_rank()
if attempt == 0 and rank == 1:
    print("rank 1 fails in attempt 0", flush=True)
    sys.exit(3)
if attempt == 0:
    dist.barrier()  # blocks until the agent stops this rank
print(f"attempt {attempt} rank {rank} allreduce={t.item():.0f}", flush=True)
