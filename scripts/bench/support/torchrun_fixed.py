"""torchrun from Debian's torch 1.13, made to run on Python 3.11 for benchmarking.

torch 1.13's Std.from_str relies on `Std(0) in Std`, which Python 3.11's IntFlag answers
False for, so every launch dies with "'NoneType' object has no attribute 'get'". This wrapper
replaces that one method (in memory only; torch itself is not modified) and runs torchrun.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(r"^\d$", vm):
        return cls(int(vm))
    out = {}
    for item in vm.split(","):
        rank, value = item.split(":")
        out[int(rank)] = cls(int(value))
    return out


api.Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402

sys.exit(main())
