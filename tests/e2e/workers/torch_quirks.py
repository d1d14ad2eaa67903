"""Work-arounds for Debian's own torch builds, imported by the test workers (never by accel).

Debian trixie's python3-torch 2.6 is built without libuv, while torch 2.x's TCPStore defaults to
use_libuv=True; init_process_group's env:// path under an agent store
(TORCHELASTIC_USE_AGENT_STORE=True) takes that default and fails with "use_libuv was requested
but PyTorch was build without libuv support" (torchrun fails the same way in that build). pip's
torch has libuv, and torch 1.13 has no such option: for them this module changes nothing."""
import datetime
import functools
import sys

import torch.distributed as dist


def _lacks_libuv():
    try:
        # Port 1 is never a TCPStore: with libuv this fails to connect within a millisecond.
        dist.TCPStore("127.0.0.1", 1, None, False, datetime.timedelta(milliseconds=1), use_libuv=True)
    except TypeError:
        return False  # torch 1.13: no use_libuv at all
    except Exception as e:  # noqa: BLE001 - the connect error has several types across releases
        return "libuv" in str(e)
    return False


USE_LIBUV = not _lacks_libuv()
if not USE_LIBUV:
    _rendezvous = sys.modules["torch.distributed.rendezvous"]  # the package re-exports a function of that name
    _rendezvous.TCPStore = functools.partial(dist.TCPStore, use_libuv=False)


def tcp_store(host, port, world_size, is_master, timeout):
    """A TCPStore client or server that works on every torch the tests meet."""
    if "use_libuv" in (dist.TCPStore.__init__.__doc__ or ""):
        return dist.TCPStore(host, port, world_size, is_master, timeout, use_libuv=USE_LIBUV)
    return dist.TCPStore(host, port, world_size, is_master, timeout)
