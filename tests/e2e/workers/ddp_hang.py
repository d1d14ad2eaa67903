# A DDP job without heartbeats (issue 36): rank 1 stops at step 5 before loss.backward()
# ("backward"), before optimizer.step() ("step") or in its data loader's __getitem__
# ("loader"), after writing the time to MARK. The other ranks end up waiting inside DDP's
# backward, where its reducer all-reduces. Usage: ddp_hang.py WHERE MARK
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import torch_quirks  # noqa: F401  (Debian's torch 2.6 without libuv; see the module)

where, mark = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0


def stop(here):
    if rank == 1 and step == 5 and where == here:
        with open(mark + ".tmp", "w") as f:
            f.write(str(time.time()))
        os.rename(mark + ".tmp", mark)
        time.sleep(600)  # STUCK HERE


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        stop("loader")
        return torch.randn(8), torch.randn(1)


batches = iter(torch.utils.data.DataLoader(Data(), batch_size=4))
for step in range(1, 1 << 30):
    x, y = next(batches)
    loss = torch.nn.functional.mse_loss(model(x), y)
    stop("backward")
    loss.backward()
    stop("step")
    opt.step()
    opt.zero_grad()
