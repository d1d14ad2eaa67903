"""Debian 12's torchrun (torch 1.13) under Python 3.11: `python3 torchrun113.py ARGS` is
`python3 -m torch.distributed.run ARGS` with one fix.

What breaks: torch 1.13's Std.from_str maps "0".."3" to a Std member with `for s in Std: if s == v`.
Since Python 3.11, iterating an IntFlag yields only its canonical one-bit members (OUT, ERR), so
NONE (0) and ALL (3) are never found and from_str returns None. Every launch then fails in
start_processes with "AttributeError: 'NoneType' object has no attribute 'get'" — even without
--redirects/--tee, whose default is "0". The fix: the same regexes, members made with Std(int).
Debian's files are not touched."""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (after the fix: run.py binds Std at import)

if __name__ == "__main__":
    sys.exit(main())
