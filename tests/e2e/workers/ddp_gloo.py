"""A real python3-torch worker: process group from accel's environment, all_reduce, one DDP
step, barrier. Prints one line per rank that the test checks."""
import os
import torch
import torch.distributed as dist

import torch_quirks  # noqa: F401  (Debian's torch 2.6 without libuv; see the module)

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
expected = world * (world + 1) / 2
assert torch.allclose(t, torch.full((4,), expected)), t

torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.full((4, 8), float(rank))
loss = model(x).pow(2).sum()
loss.backward()
opt.step()
# After DDP the parameters are identical on every rank.
w = model.module.weight.detach().clone()
gathered = [torch.zeros_like(w) for _ in range(world)]
dist.all_gather(gathered, w)
assert all(torch.equal(g, w) for g in gathered)
dist.barrier()
print(f"ok rank={rank} world={world} allreduce={t[0].item():.0f}", flush=True)
dist.destroy_process_group()
