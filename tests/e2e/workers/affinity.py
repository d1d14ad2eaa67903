# Writes the CPUs this worker may run on, read back with sched_getaffinity, and its
# OMP_NUM_THREADS to $OUT_DIR/rank_$RANK.cpus ("0,1 2").
import os

cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
with open(os.path.join(os.environ["OUT_DIR"], "rank_%s.cpus" % os.environ["RANK"]), "w") as f:
    f.write("%s %s\n" % (cpus, os.environ.get("OMP_NUM_THREADS", "unset")))
