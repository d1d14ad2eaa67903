"""python3-torch's own TCPStore client against the agent's store (MASTER_ADDR/MASTER_PORT):
every operation torch 1.13 has, its blocking semantics and timeouts. Rank 1 reads what rank 0
wrote."""
import datetime
import os
import sys

import torch.distributed as dist

addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rank = int(os.environ["RANK"])
assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"


def client(seconds=10):
    return dist.TCPStore(addr, port, 2, False, datetime.timedelta(seconds=seconds))


def expect_timeout(fn):
    try:
        fn()
    except RuntimeError as e:
        assert "timeout" in str(e).lower() or "timed out" in str(e).lower(), e
        return
    sys.exit("no timeout")


s = client()
if rank == 1:
    assert s.get(f"from0") == b"hello from rank 0"  # blocks until rank 0 sets it
    s.set("done1", "1")
    print("rank 1 read rank 0's key", flush=True)
    sys.exit(0)

s.set("k", "v")
assert s.get("k") == b"v"
assert s.add("c", 3) == 3 and s.add("c", -1) == 2
assert s.get("c") == b"2"
assert s.compare_set("k", "v", "w") == b"w"
assert s.compare_set("k", "x", "y") == b"w"
assert s.compare_set("new", "", "z") == b"z"
s.wait(["k", "c"])
assert s.check(["k", "new"]) if hasattr(s, "check") else True
s.set("from0", "hello from rank 0")
s.wait(["done1"], datetime.timedelta(seconds=10))

s.set_timeout(datetime.timedelta(milliseconds=300))
expect_timeout(lambda: s.get("missing"))

s2 = client()  # torch 1.13 cannot cancel a timed-out wait: use a fresh client
expect_timeout(lambda: s2.wait(["never"], datetime.timedelta(milliseconds=200)))
s3 = client()
# init/ (the clients' join counter), /k, /c, /new, /from0, /done1
assert s3.num_keys() == 6, s3.num_keys()
assert s3.delete_key("k") is True
assert s3.delete_key("k") is False
assert s3.num_keys() == 5
print("rank 0 store ok", flush=True)
