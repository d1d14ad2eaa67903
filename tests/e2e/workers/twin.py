"""The worker of tests/e2e/torchrun.sh, run unchanged under torchrun and under accel.

`twin.py MODE`: writes its whole environment to $TWIN_OUT/env.<attempt>.<rank>, one line to
stdout and one to stderr, then
  ddp         gloo all_reduce and a DDP step (ddp_gloo.py), every attempt;
  fail        rank 1 exits 3 once rank 0 has written its lines; rank 0 waits until its
              launcher stops it;
  fail_first  as `fail` in attempt 0, as `ddp` in every later one;
  raise       as `fail`, but rank 1 raises under torch's @record, which writes the exception to
              TORCHELASTIC_ERROR_FILE (the launcher's error.json) and exits 1.
Rank 1 waits for rank 0's lines before failing, so what rank 0 wrote does not depend on how fast
its launcher stops it."""
import os
import sys
import time

import torch_quirks  # noqa: F401  (Debian's torch 2.6 without libuv; see the module)
from torch.distributed.elastic.multiprocessing.errors import record

out = os.environ["TWIN_OUT"]
mode = sys.argv[1]
rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])

env = "".join(f"{k}={v}\n" for k, v in sorted(os.environ.items()))
with open(f"{out}/.env.{attempt}.{rank}", "w") as f:
    f.write(env)
os.rename(f"{out}/.env.{attempt}.{rank}", f"{out}/env.{attempt}.{rank}")

print(f"stdout of rank {rank} in attempt {attempt}", flush=True)
print(f"stderr of rank {rank} in attempt {attempt}", file=sys.stderr, flush=True)
open(f"{out}/printed.{attempt}.{rank}", "w").close()



def wait_for_rank_0():
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{out}/printed.{attempt}.0"):
        assert time.monotonic() < deadline, "rank 0 never printed"
        time.sleep(0.02)


@record
def raise_error():
    raise RuntimeError(f"rank {rank} raises in attempt {attempt}")


if mode in ("fail", "raise") or (mode == "fail_first" and attempt == 0):
    if rank == 1:
        wait_for_rank_0()
        if mode == "raise":
            raise_error()
        print("rank 1 fails with exit code 3", file=sys.stderr, flush=True)
        sys.exit(3)
    # Rank 0 waits to be stopped. Not in init_process_group: torchrun 2.x keeps the store's keys
    # across attempts, so attempt 1's rank 1 could read attempt 0's gloo address and fail
    # ("Gloo connectFullMesh failed"), a torchrun flaw seen here 1 run in 5 (accel clears the
    # keys: e2e.launch.restart_gloo, e2e.torch2.restart).
    while True:
        time.sleep(0.05)
elif mode in ("ddp", "fail_first"):
    import ddp_gloo  # noqa: F401  (all_reduce, a DDP step, barrier; prints "ok rank=...")
else:
    sys.exit(f"twin.py: unknown mode {mode}")
