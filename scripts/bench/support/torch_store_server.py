"""Hosts python3-torch's own TCPStore server (torch 1.13, the reference) on a free port, prints
the port, and serves until stdin closes."""
import datetime
import resource
import sys

import torch.distributed as dist

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # same limit as accel's server
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=300), wait_for_workers=False)
print(store.port, flush=True)
sys.stdin.read()
