// planLaunch (planner.h): makeLaunchPlan, then the steps that only this machine's facts decide.

#include "launcher/plan/planner.h"

#include "launcher/plan/cpu_affinity.h"
#include "probes/gpu_probe.h"
#include "probes/net_check.h"
#include "probes/python_probe.h"

namespace accel::launcher {
namespace {

// SLURM names the master by its node name; where that name does not resolve, the controller's
// NodeAddr for it does.
void resolveSchedulerMaster(LaunchPlan& plan) {
  if (!plan.master_addr_from_scheduler || plan.scheduler != "SLURM" ||
      probes::routeTo(plan.master_addr)) {
    return;
  }
  if (auto addr = probes::slurmNodeAddress(plan.master_addr)) {
    plan.notices.push_back("SLURM node '" + plan.master_addr +
                           "' does not resolve here; using its NodeAddr " + *addr);
    plan.master_addr = *addr;
  }
}

// torchrun's elastic command line: the agent on the endpoint's host (or the one is_host= in
// --rdzv_conf names) hosts the store as machine 0; the others join it and are ranked by arrival.
void decideStoreHost(LaunchPlan& plan) {
  if (!plan.rank_by_arrival || plan.etcd_endpoints) return;
  const bool host = plan.store_host_configured.value_or(probes::isThisMachine(plan.master_addr));
  const std::string endpoint =
      plan.master_addr + ":" + std::to_string(plan.master_port.value_or(0));
  if (host) {
    plan.machine_rank = 0;
    plan.rendezvous_notice =
        ("--rdzv_backend c10d: this machine hosts the rendezvous at " + endpoint + " (" +
         (plan.store_host_configured ? "is_host in --rdzv_conf" : "the endpoint is this machine") +
         ") and is machine 0; the others are ranked in the order they join");
  } else {
    plan.rendezvous_notice = "--rdzv_backend c10d: this machine joins the rendezvous at " +
                             endpoint +
                             "; its machine rank is the order in which it joins (the endpoint's "
                             "host is machine 0)";
  }
}

// Nobody chose the interpreter and python3 has no torch: the first other one that has it, said
// once (probes::pythonWithTorchByDefault; only for a .py or -m job).
void preferPythonWithTorch(LaunchPlan& plan) {
  if (!plan.python_by_default || plan.argv.empty()) return;
  auto chosen = probes::pythonWithTorchByDefault();  // argv[0] is python3 from PATH
  if (chosen.notice.empty()) return;
  plan.notices.push_back(chosen.notice);
  plan.argv[0] = chosen.command;
}

}  // namespace

Expected<LaunchPlan> planLaunch(const LaunchOptions& options,
                                const probes::Environment& parentEnv) {
  auto plan =
      makeLaunchPlan(options, config::PathEnv::fromProcess(), parentEnv, probes::countUsableGpus);
  if (!plan) return plan;
  if (auto ok = assignCpuAffinity(*plan); !ok) return std::move(ok).takeError();
  resolveSchedulerMaster(*plan);
  decideStoreHost(*plan);
  preferPythonWithTorch(*plan);
  return plan;
}

}  // namespace accel::launcher
