"""Hosts python3-torch's own TCPStore server (the reference: torch 1.13's, or with torch 2.x its
default libuv server where the build has libuv, else its legacy one — Debian's 2.6 has no
libuv) on a free port, prints the port and the backend, and serves until stdin closes."""
import datetime
import resource
import sys

import torch.distributed as dist

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # same limit as accel's server
args = ("127.0.0.1", 0, None, True, datetime.timedelta(seconds=300))
try:
    store = dist.TCPStore(*args, wait_for_workers=False)
    backend = "libuv" if getattr(store, "libuvBackend", False) else "legacy"
except RuntimeError as e:  # torch 2.x built without libuv
    if "libuv" not in str(e):
        raise
    store = dist.TCPStore(*args, wait_for_workers=False, use_libuv=False)
    backend = "legacy"
print(store.port, backend, flush=True)
sys.stdin.read()
