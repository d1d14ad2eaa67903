"""Debian trixie's torchrun (torch 2.6, in scripts/torch2_chroot.sh's chroot): `python3
torchrun26.py ARGS` is `python3 -m torch.distributed.run ARGS` with one fix.

What breaks: that build has no libuv, and the static rendezvous (--master_port, --nnodes 1)
creates the agent's TCPStore with torch's default use_libuv=True, ignoring USE_LIBUV=0: every
launch fails with "use_libuv was requested but PyTorch was build without libuv support"; the c10d
rendezvous backend's TCPStore (--rdzv_backend c10d) and the store the dynamic rendezvous makes for
the workers the same. The fix: those TCPStores are made with use_libuv=False (the workers get the
same from torch_quirks)."""
import functools
import sys

import torch.distributed as dist
from torch.distributed.elastic.rendezvous import (
    c10d_rendezvous_backend,
    dynamic_rendezvous,
    static_tcp_rendezvous,
)

static_tcp_rendezvous.TCPStore = functools.partial(dist.TCPStore, use_libuv=False)
c10d_rendezvous_backend.TCPStore = functools.partial(dist.TCPStore, use_libuv=False)
dynamic_rendezvous.DynamicRendezvousHandler._create_tcp_store_server = (
    lambda self, master_addr, master_port: dist.TCPStore(
        host_name=master_addr, port=master_port, is_master=True, multi_tenant=True, use_libuv=False
    )
)

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
