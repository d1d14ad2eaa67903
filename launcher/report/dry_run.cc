#include "launcher/report/dry_run.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/plan/cpu_affinity.h"
#include "launcher/plan/run_dir.h"
#include "launcher/plan/worker_env.h"
#include "libaccel/common/env_names.h"

namespace accel::launcher {
namespace {

std::string shellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,+@%") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What a dry run can know of the placement. The store's port is 0 when the agent would pick a
// free one; a machine ranked by arrival does not know its rank and is shown as machine 1.
struct DryRunView {
  Placement placement;
  std::vector<std::string> notices;
};

DryRunView viewOf(const LaunchPlan& plan) {
  DryRunView view{staticPlacement(plan, plan.master_port.value_or(0)), plan.notices};
  if (!plan.rendezvous_notice.empty()) view.notices.push_back(plan.rendezvous_notice);
  if (!plan.machine_rank) {
    view.placement.machine_rank = 1;
    view.placement.rank_offset = plan.local_world_size;
    view.notices.push_back(
        "this machine's rank comes from the order in which the machines join; the dry run "
        "shows it as machine 1");
  }
  return view;
}

WorkerSlot slotOf(const LaunchPlan& plan, int localRank) {
  return WorkerSlot{localRank, 0, plan.exec_in_place ? "" : errorFile("<run dir>", 0, localRank)};
}

// The local ranks this machine starts: all of them, or the one this scheduler task becomes.
std::pair<int, int> localRanks(const LaunchPlan& plan) {
  return plan.exec_in_place ? std::pair{plan.exec_local_rank, plan.exec_local_rank + 1}
                            : std::pair{0, plan.local_world_size};
}

}  // namespace

// The command once, the variables every local rank shares once, then one line per rank with
// its CPUs and its own variables (RANK, LOCAL_RANK, its error file ...): 8 ranks read in about
// 45 lines, not 8 × 35. A port the agent will choose is shown as such.
std::string renderDryRun(const LaunchPlan& plan) {
  const DryRunView view = viewOf(plan);
  std::string out;
  for (const auto& text : view.notices) out += "notice: " + text + "\n";
  const auto [first, last] = localRanks(plan);
  std::vector<std::vector<std::string>> vars;
  for (int lr = first; lr < last; ++lr)
    vars.push_back(launcherVariables(plan, view.placement, slotOf(plan, lr)));
  auto shared = [&vars](const std::string& kv) {
    for (const auto& v : vars)
      if (std::find(v.begin(), v.end(), kv) == v.end()) return false;
    return true;
  };
  out += "command:";
  for (const auto& a : plan.argv) out += " " + shellQuote(a);
  out += "\nenvironment of every rank (on top of the inherited one):\n";
  for (const auto& kv : vars.front()) {
    if (!shared(kv)) continue;
    const bool chosenPort = kv == std::string(env::kMasterPort) + "=0" && !plan.master_port;
    out += "    " +
           (chosenPort ? std::string(env::kMasterPort) + "=<a free port, chosen at launch>" : kv) +
           "\n";
  }
  for (int lr = first; lr < last; ++lr) {
    out += "rank " + std::to_string(view.placement.globalRank(lr)) + " (local rank " +
           std::to_string(lr) + "):";
    if (static_cast<size_t>(lr) < plan.rank_cpus.size())
      out += " cpus " + formatCpuList(plan.rank_cpus[static_cast<size_t>(lr)]) + ";";
    for (const auto& kv : vars[static_cast<size_t>(lr - first)])
      if (!shared(kv)) out += " " + kv;
    out += "\n";
  }
  return out;
}

std::string renderDryRunJson(const LaunchPlan& plan) {
  const DryRunView view = viewOf(plan);
  nlohmann::json ranks = nlohmann::json::array();
  const auto [first, last] = localRanks(plan);
  for (int lr = first; lr < last; ++lr) {
    ranks.push_back({{"rank", view.placement.globalRank(lr)},
                     {"local_rank", lr},
                     {"command", plan.argv},
                     {"env", launcherVariableMap(plan, view.placement, slotOf(plan, lr))}});
  }
  return nlohmann::json{{"ranks", ranks},
                        {"notices", view.notices},
                        {"world_size", plan.world_size},
                        {"num_machines", plan.num_machines},
                        {"machine_rank", view.placement.machine_rank}}
             .dump(1) +
         "\n";
}

}  // namespace accel::launcher
