# Writes the CPUs this worker may run on, read back with sched_getaffinity, and its
# OMP_NUM_THREADS to $OUT_DIR/rank_$RANK.cpus ("0,1 2"); a single process under accel launch has no
# RANK (accelerate starts it without torchrun's variables) and writes rank_0.
import os

cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
with open(os.path.join(os.environ["OUT_DIR"], "rank_%s.cpus" % os.environ.get("RANK", "0")), "w") as f:
    f.write("%s %s\n" % (cpus, os.environ.get("OMP_NUM_THREADS", "unset")))
