"""The reference for scripts/bench/train.sh: the C++ example's models, data order and batch in
python3-torch with DistributedDataParallel, over gloo on the CPU or NCCL with --device cuda (one
GPU per rank, cuda:LOCAL_RANK; fp16 with torch's GradScaler). Run under `accel launch` (or
torchrun). Prints one line like the C++ example's, from rank 0; with --profile, each rank's
breakdown of a step in the example's format (CUDA events on a GPU, else the wall clock; DDP
all-reduces inside backward, so its sync is in backward)."""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530
start = time.time()
p = argparse.ArgumentParser()
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
p.add_argument("--steps", type=int, default=0)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--mixed_precision", default=os.environ.get("ACCELERATE_MIXED_PRECISION", "no"))
p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
p.add_argument("--profile", action="store_true")
p.add_argument("--fused_adam", action="store_true", help="Adam(fused=True) (default: torch's choice, foreach on CUDA)")
args = p.parse_args()


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape).copy())


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)
        self.fc1, self.fc2 = nn.Linear(3136, 128), nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


world = int(os.environ.get("WORLD_SIZE", "1"))
cuda = args.device == "cuda"
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
if world > 1:
    dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank() if world > 1 else 0
torch.manual_seed(0)
x = ((idx(f"{args.data}/train-images-idx3-ubyte.gz").float() / 255 - MEAN) / STD).unsqueeze(1).to(device)
y = idx(f"{args.data}/train-labels-idx1-ubyte.gz").long().to(device)
model = (Mlp() if args.model == "mlp" else Cnn()).to(device)
if world > 1:
    model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if args.model == "mlp"
       else torch.optim.Adam(model.parameters(), lr=1e-3, **({"fused": True} if args.fused_adam else {})))
# File order, batch i to rank i mod N (the C++ example with --no-shuffle).
# The same number of steps on every rank (DDP's all-reduces must pair up): the uneven last
# batches of an epoch are left out.
n_batches = len(x) // args.batch
mine = list(range(rank, n_batches, world))[:n_batches // world]
if args.steps:
    mine = mine[:args.steps]
bf16, fp16 = args.mixed_precision == "bf16", args.mixed_precision == "fp16"
if fp16 and not cuda:
    raise SystemExit("fp16 needs --device cuda")
scaler = torch.cuda.amp.GradScaler(enabled=fp16) if cuda else None


class Marks:
    """The example's StepProfile: a mark per phase's end, on the device's stream (CUDA events,
    read once the run ended) or the wall clock; the first step left out."""

    PHASES = ["data", "forward", "backward", "sync", "optimizer"]

    def __init__(self):
        self.steps = []

    def mark(self, phase):
        if cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
        else:
            e = time.perf_counter()
        self.steps[-1].append((phase, e))

    def begin(self):
        self.steps.append([])
        self.mark(None)

    def text(self, samples_per_step):
        if cuda:
            torch.cuda.synchronize()
        ms = (lambda a, b: a.elapsed_time(b)) if cuda else (lambda a, b: (b - a) * 1e3)
        sums, step, n = dict.fromkeys(self.PHASES, 0.0), 0.0, 0
        for i, marks in enumerate(self.steps[1:], start=1):
            for (_, a), (phase, b) in zip(marks, marks[1:]):
                sums[phase] += ms(a, b)
            end = self.steps[i + 1][0][1] if i + 1 < len(self.steps) else marks[-1][1]
            step += ms(marks[0][1], end)
            n += 1
        if n == 0:
            return None
        parts = ", ".join(f"{p} {sums[p] / n:.3f}" for p in self.PHASES)
        other = (step - sum(sums.values())) / n
        return (f"ms per step over {n} steps, {'CUDA events' if cuda else 'wall clock'}): {parts}, "
                f"other {other:.3f} (step {step / n:.3f}): {samples_per_step * 1e3 * n / step:.0f} "
                f"samples/s at that pace")


marks = Marks() if args.profile else None
first = None
t0 = time.time()
for b in mine:
    if marks:
        marks.begin()
    xb, yb = x[b * args.batch:(b + 1) * args.batch], y[b * args.batch:(b + 1) * args.batch]
    if marks:
        marks.mark("data")
    with torch.autocast(device.type, dtype=torch.float16 if fp16 else torch.bfloat16, enabled=bf16 or fp16):
        logits = model(xb)
    loss = F.cross_entropy(logits.float(), yb)
    if marks:
        marks.mark("forward")
    opt.zero_grad()
    if scaler:
        scaler.scale(loss).backward()
        if marks:
            marks.mark("backward")
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        if marks:
            marks.mark("backward")
        opt.step()
    if marks:
        marks.mark("optimizer")
    if first is None:
        first = time.time() - start
if world > 1:
    dist.barrier()
if cuda:
    torch.cuda.synchronize()
seconds = time.time() - t0
if rank == 0:
    precision = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    print(f"model {args.model}, {world} processes, {precision}: {len(mine)} steps, "
          f"final loss {loss.item():.4f}, {len(mine) * args.batch * world / seconds:.0f} samples/s, "
          f"first step after {first:.2f} s, on {device}", flush=True)
if marks and marks.text(args.batch * world):
    print(f"profile (rank {rank}, {marks.text(args.batch * world)}", flush=True)
