#include "launcher/plan/worker_env.h"

#include <map>

#include "libaccel/common/env_names.h"

namespace accel::launcher {
namespace {

constexpr const char* kHeartbeatPrefix = "accel_step/";
constexpr const char* kWorkPrefix = "accel_work_us/";

std::map<std::string, std::string> variables(const LaunchPlan& plan, const Placement& placement,
                                             const WorkerSlot& slot) {
  std::map<std::string, std::string> v = plan.common_env;
  if (plan.omp_num_threads) v[env::kOmpNumThreads] = std::to_string(*plan.omp_num_threads);
  if (static_cast<size_t>(slot.local_rank) < plan.rank_omp_threads.size()) {
    v[env::kOmpNumThreads] =
        std::to_string(plan.rank_omp_threads[static_cast<size_t>(slot.local_rank)]);
  }
  if (!slot.error_file.empty()) v[env::kErrorFile] = slot.error_file;
  if (placement.socket_interface) v[env::kGlooSocketIfname] = *placement.socket_interface;
  if (!plan.torchrun_env) return v;  // accelerate's single process: no torchrun variables
  const int rank = placement.globalRank(slot.local_rank);
  v[env::kRank] = std::to_string(rank);
  v[env::kLocalRank] = std::to_string(slot.local_rank);
  if (plan.virtual_local_rank) {  // torch 2.12's virtual local rank: its GPU is device 0
    v[env::kLocalRank] = "0";
    const auto at = static_cast<size_t>(slot.local_rank);
    if (at < plan.virtual_devices.size()) v[env::kCudaVisibleDevices] = plan.virtual_devices[at];
  }
  v[env::kWorldSize] = std::to_string(placement.world_size);
  v[env::kLocalWorldSize] = std::to_string(plan.local_world_size);
  v[env::kGroupRank] = std::to_string(placement.machine_rank);
  v[env::kGroupWorldSize] = std::to_string(placement.num_machines);
  v[env::kRoleRank] = std::to_string(rank);
  v[env::kRoleWorldSize] = std::to_string(placement.world_size);
  v[env::kRoleName] = plan.role;
  v[env::kMasterAddr] = placement.master_addr;
  v[env::kMasterPort] = std::to_string(placement.master_port);
  v[env::kRestartCount] = std::to_string(slot.restart_count);
  v[env::kMaxRestarts] = std::to_string(plan.max_restarts);
  v[env::kRunId] = plan.run_id;
  // The agent hosts the job's store at MASTER_ADDR:MASTER_PORT for the whole job; torch then
  // connects as a client and prefixes its keys with /worker/attempt_<restart count>. Without an
  // agent (a rank per scheduler task), rank 0 hosts it, as in torch's env:// init.
  v[env::kUseAgentStore] = plan.agent_store ? "True" : "False";
  // Progress heartbeats for the agent (launcher/supervise/rank_watch.h), in its store.
  if (plan.agent_store) {
    v[env::kHeartbeatKey] = heartbeatKey(rank);
    v[env::kWorkKey] = workKey(rank);  // its own work per step: straggler scores
  }
  return v;
}

}  // namespace

std::map<std::string, std::string> launcherVariableMap(const LaunchPlan& plan,
                                                       const Placement& placement,
                                                       const WorkerSlot& slot) {
  return variables(plan, placement, slot);
}

std::vector<std::string> launcherVariables(const LaunchPlan& plan, const Placement& placement,
                                           const WorkerSlot& slot) {
  std::vector<std::string> out;
  for (const auto& [key, value] : variables(plan, placement, slot)) {
    out.push_back(key + "=" + value);
  }
  return out;
}

std::vector<std::string> workerEnvironment(const LaunchPlan& plan, const Placement& placement,
                                           const WorkerSlot& slot,
                                           const probes::Environment& parent) {
  auto v = variables(plan, placement, slot);
  std::vector<std::string> out;
  out.reserve(parent.size() + v.size());
  for (const auto& entry : parent) {
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    if (v.count(entry.substr(0, eq))) continue;
    out.push_back(entry);
  }
  for (const auto& [key, value] : v) out.push_back(key + "=" + value);
  return out;
}

std::optional<std::string> chooseSocketInterface(const probes::Environment& parent,
                                                 const std::string& candidate) {
  if (candidate.empty() || probes::lookup(parent, env::kGlooSocketIfname)) return std::nullopt;
  return candidate;
}

std::string heartbeatKey(int rank) { return kHeartbeatPrefix + std::to_string(rank); }

std::string storedHeartbeatPrefix() { return std::string("/") + kHeartbeatPrefix; }

std::string workKey(int rank) { return kWorkPrefix + std::to_string(rank); }

std::string storedWorkPrefix() { return std::string("/") + kWorkPrefix; }

}  // namespace accel::launcher
