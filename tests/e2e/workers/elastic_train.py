"""A training job that survives changes of its group: linear regression by SGD on a global batch of
24 samples per step, split across however many ranks the round has, the shards' gradients summed
by a Gloo all_reduce — so every step moves the weights the same way whatever the world size
(float64; only the order of the sums differs). Rank 0 saves a checkpoint every EVERY steps
(written to a temporary file, then renamed) and every rank resumes from the last one.

    elastic_train.py CKPT_DIR STEPS EVERY OUT_DIR [SLEEP_S]

OUT_DIR/steps gets one line per step rank 0 completes ("STEP world=W restart=R"), and at the end
OUT_DIR/result "steps=STEPS loss=L" (the loss of the final weights on a held-out batch)."""
import os
import sys
import time

import torch
import torch.distributed as dist

ckpt_dir, total, every, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.1
GLOBAL_BATCH, DIM, LR = 24, 8, 0.05

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
true_w = torch.arange(1.0, DIM + 1, dtype=torch.float64)


def batch(step):
    """The global batch of `step`: the same on every rank and in every round."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, DIM, generator=g, dtype=torch.float64)
    return x, x @ true_w + 0.01 * torch.randn(GLOBAL_BATCH, generator=g, dtype=torch.float64)


path = os.path.join(ckpt_dir, "ckpt.pt")
w, start = torch.zeros(DIM, dtype=torch.float64), 0
if os.path.exists(path):
    state = torch.load(path)
    w, start = state["w"], state["step"]
for step in range(start, total):
    x, y = batch(step)
    lo, hi = rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world
    xs, ys = x[lo:hi], y[lo:hi]
    grad = 2 * xs.T @ (xs @ w - ys) / GLOBAL_BATCH  # this shard's part of the batch mean's
    dist.all_reduce(grad)
    w -= LR * grad
    if rank == 0:
        if (step + 1) % every == 0:
            tmp = path + ".tmp"
            torch.save({"w": w, "step": step + 1}, tmp)
            os.replace(tmp, path)
        with open(os.path.join(out, "steps"), "a") as f:
            f.write(f"{step + 1} world={world} restart={restart}\n")
    time.sleep(pause)
dist.barrier()
if rank == 0:
    x, y = batch(10**6)
    loss = ((x @ w - y) ** 2).mean().item()
    with open(os.path.join(out, "result"), "w") as f:
        f.write(f"steps={total} loss={loss:.15e}\n")
