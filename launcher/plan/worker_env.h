#pragma once
// workerEnvironment: the environment of one worker — a pure function of the plan, the round's
// placement, the worker's slot and the parent environment, so it is unit-tested without
// spawning anything.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/plan/launch_plan.h"
#include "launcher/plan/placement.h"
#include "probes/environment.h"

namespace accel::launcher {

struct WorkerSlot {
  int local_rank = 0;
  int restart_count = 0;   // TORCHELASTIC_RESTART_COUNT
  std::string error_file;  // TORCHELASTIC_ERROR_FILE for this worker
};

// Every variable accel sets for this worker, without the parent's: key → value, and as
// KEY=VALUE sorted by key.
std::map<std::string, std::string> launcherVariableMap(const LaunchPlan& plan,
                                                       const Placement& placement,
                                                       const WorkerSlot& slot);
std::vector<std::string> launcherVariables(const LaunchPlan& plan, const Placement& placement,
                                           const WorkerSlot& slot);

// The parent environment with launcherVariables applied on top (accel's values win), ready for
// execve. OMP_NUM_THREADS from the parent is kept unless --num_cpu_threads_per_process is given.
std::vector<std::string> workerEnvironment(const LaunchPlan& plan, const Placement& placement,
                                           const WorkerSlot& slot,
                                           const probes::Environment& parent);

// The one GLOO_SOCKET_IFNAME rule: the interface that reaches the other machines (`candidate`,
// empty when unknown), unless the user chose one in the agent's environment.
std::optional<std::string> chooseSocketInterface(const probes::Environment& parent,
                                                 const std::string& candidate);

// The heartbeat key of `rank`, as workers find it in $ACCEL_HEARTBEAT_KEY.
std::string heartbeatKey(int rank);
// The prefix of every heartbeat key as the store keeps it (torch's clients add "/").
std::string storedHeartbeatPrefix();
// The key `rank` adds its own work per step to, in microseconds ($ACCEL_WORK_KEY), and its
// prefix as the store keeps it.
std::string workKey(int rank);
std::string storedWorkPrefix();

}  // namespace accel::launcher
