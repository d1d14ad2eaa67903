"""The reference for scripts/bench/train.sh: the C++ example's models, data order and batch in
python3-torch with DistributedDataParallel, over gloo on the CPU or NCCL with --device cuda (one
GPU per rank, cuda:LOCAL_RANK; fp16 with torch's GradScaler). Run under `accel launch` (or
torchrun). Prints one line like the C++ example's, from rank 0."""
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
       else torch.optim.Adam(model.parameters(), lr=1e-3))
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
first = None
t0 = time.time()
for b in mine:
    xb, yb = x[b * args.batch:(b + 1) * args.batch], y[b * args.batch:(b + 1) * args.batch]
    with torch.autocast(device.type, dtype=torch.float16 if fp16 else torch.bfloat16, enabled=bf16 or fp16):
        logits = model(xb)
    loss = F.cross_entropy(logits.float(), yb)
    opt.zero_grad()
    if scaler:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
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
