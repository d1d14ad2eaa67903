"""A rank whose background thread keeps using CPU (about a fifth of a core: far more than Gloo's
or a logger's threads) whatever its main thread does. Runs with torch 1.13 and 2.6, 2 ranks:
  busy_thread.py stuck FILE   rank 0's main thread stops outside any collective (after writing
                              the time to FILE); rank 1 waits for it in all_reduce
  busy_thread.py compute S    both main threads compute for S seconds, silent, then all_reduce
"""
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import torch_quirks  # noqa: F401  (Debian's torch 2.6 without libuv; see the module)


def background():
    while True:
        until = time.thread_time() + 0.02
        while time.thread_time() < until:
            pass
        time.sleep(0.08)


threading.Thread(target=background, daemon=True).start()
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
if sys.argv[1] == "stuck":
    if rank == 0:
        with open(sys.argv[2] + ".tmp", "w") as f:
            f.write(str(time.time()))
        os.rename(sys.argv[2] + ".tmp", sys.argv[2])
        threading.Event().wait()  # STUCK HERE
    dist.all_reduce(t)
else:
    a = torch.randn(128, 128)
    until = time.time() + float(sys.argv[2])
    while time.time() < until:
        a = torch.tanh(a @ a)
    dist.all_reduce(t)
    print(f"rank {rank} computed", flush=True)
