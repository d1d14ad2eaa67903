#pragma once
// workerEnvironment: the environment of one worker — a pure function of the plan, the worker's
// slot and the parent environment, so it is unit-tested without spawning anything.

#include <map>
#include <string>
#include <vector>

#include "launcher/launch_plan.h"

namespace accel::launcher {

// The vocabulary of the machine's environment comes from probes/.
using probes::Environment;
using probes::lookup;

struct WorkerSlot {
  int local_rank = 0;
  int restart_count = 0;   // TORCHELASTIC_RESTART_COUNT
  int master_port = 0;     // the port actually used (chosen by the agent if not given)
  std::string error_file;  // TORCHELASTIC_ERROR_FILE for this worker
};

// The global rank of a local rank on this machine.
inline int globalRank(const LaunchPlan& plan, int localRank) {
  return plan.rank_offset + localRank;
}

// Every variable accel sets for this worker, without the parent's: key → value, and as KEY=VALUE
// sorted by key.
std::map<std::string, std::string> launcherVariableMap(const LaunchPlan& plan,
                                                       const WorkerSlot& slot);
std::vector<std::string> launcherVariables(const LaunchPlan& plan, const WorkerSlot& slot);

// The parent environment with launcherVariables applied on top (accel's values win), ready for
// execve. OMP_NUM_THREADS from the parent is kept unless --num_cpu_threads_per_process is given.
std::vector<std::string> workerEnvironment(const LaunchPlan& plan, const WorkerSlot& slot,
                                           const Environment& parent);

}  // namespace accel::launcher
