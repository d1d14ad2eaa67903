"""torch 2.x's own TCPStore client against the agent's store: every method the running torch has
(2.6: set/get/add/compare_set/wait/check/delete_key/num_keys/append/multi_get/multi_set; newer
releases also queues, list_keys, barrier), timeouts, and waits that time out and are cancelled
on the same connection (torch 2.x sends CANCEL_WAIT). Two ranks; rank 1 reads what rank 0 wrote."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

from torch_quirks import tcp_store

addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rank = int(os.environ["RANK"])
assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"
ms = lambda n: datetime.timedelta(milliseconds=n)  # noqa: E731


def expect_timeout(fn):
    try:
        fn()
    except Exception as e:  # DistStoreError (a RuntimeError) in 2.x
        assert "timeout" in str(e).lower() or "timed out" in str(e).lower(), e
        return
    sys.exit("no timeout")


s = tcp_store(addr, port, 2, False, datetime.timedelta(seconds=20))
if rank == 1:
    assert s.get("from0") == b"hello from rank 0"  # blocks until rank 0 sets it
    assert s.multi_get(["k", "c"]) == [b"w", b"2"]
    s.append("log", "+1")
    s.set("done1", "1")
    print("rank 1 read rank 0's keys", flush=True)
    sys.exit(0)

print(f"torch {torch.__version__}", flush=True)
s.set("k", "v")
assert s.get("k") == b"v"
assert s.add("c", 3) == 3 and s.add("c", -1) == 2
assert s.get("c") == b"2"
assert s.compare_set("k", "v", "w") == b"w"
assert s.compare_set("k", "x", "y") == b"w"  # mismatch: the stored value comes back
assert s.compare_set("new", "", "z") == b"z"  # absent + empty expected: created
assert s.compare_set("absent", "e", "d") == b"e"  # absent + non-empty expected: torch's answer
assert not s.check(["absent"])
s.wait(["k", "c"])
assert s.check(["k", "new"])
s.append("log", "a")
s.append("log", "b")
assert s.get("log") == b"ab"
s.multi_set(["m1", "m2"], ["x", "y"])
assert s.multi_get(["m1", "m2", "k"]) == [b"x", b"y", b"w"]
assert s.has_extended_api()
s.set("from0", "hello from rank 0")
s.wait(["done1"], datetime.timedelta(seconds=20))
assert s.get("log") == b"ab+1"

# A wait that times out is cancelled and the same client goes on (no fresh connection needed).
expect_timeout(lambda: s.wait(["never"], ms(200)))
assert s.get("k") == b"w"
s.set_timeout(ms(300))
expect_timeout(lambda: s.get("missing"))
assert s.add("c", 0) == 2
other = tcp_store(addr, port, None, False, datetime.timedelta(seconds=20))
other.set("never", "now")  # the cancelled waits must not wake: a stray reply would desync `s`
assert s.get("k") == b"w" and s.get("never") == b"now"

keys = ["init/", "/k", "/c", "/new", "/log", "/m1", "/m2", "/from0", "/done1", "/never"]
assert s.num_keys() == len(keys), (s.num_keys(), keys)
assert s.delete_key("k") is True
assert s.delete_key("k") is False
assert s.num_keys() == len(keys) - 1
if hasattr(s, "list_keys"):  # torch 2.10+
    assert sorted(s.list_keys()) == sorted(k[1:] for k in keys if k.startswith("/") and k != "/k")
if hasattr(s, "queue_push"):  # torch 2.8+, libuv clients only
    try:
        s.queue_push("q", "a")
        s.queue_push("q", "b")
        assert s.queue_len("q") == 2
        assert s.queue_pop("q") == b"a" and s.queue_pop("q", block=False) == b"b"
        assert s.queue_len("q") == 0
    except NotImplementedError:
        pass
if hasattr(s, "barrier"):  # torch 2.12+
    s.barrier("b", 1)
print("rank 0 store ok", flush=True)
