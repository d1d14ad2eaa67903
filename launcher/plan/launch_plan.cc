#include "launcher/plan/launch_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <random>
#include <tuple>

#include "config/schema.h"
#include "launcher/base/defaults.h"
#include "launcher/base/numbers.h"
#include "launcher/base/text.h"
#include "launcher/plan/plan_steps.h"
#include "launcher/plan/stream_masks.h"
#include "launcher/plan/worker_env.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/common/env_names.h"
#include "probes/run_program.h"
#include "probes/scheduler_env.h"
#include "probes/system_info.h"

namespace accel::launcher {

// The vocabulary of the machine's environment comes from probes/.
using detail::applyAgentFlags;
using detail::applyRendezvousFlags;
using detail::applyShutdownTimeoutEnv;
using detail::applyWatchdogTimeouts;
using detail::assignVirtualDevices;
using detail::chooseOmpThreads;
using detail::chooseRunId;
using detail::Devices;
using detail::resolveCommand;
using detail::setCommonEnv;
using probes::detectScheduler;
using probes::findInPath;
using probes::SchedulerInfo;

namespace {

int countGpuIds(const std::string& ids) {
  return static_cast<int>(std::count(ids.begin(), ids.end(), ',')) + 1;
}

bool givenAsFlag(const LaunchPlan& plan, const char* key) {
  auto it = plan.config.sources.find(key);
  return it != plan.config.sources.end() && it->second == config::Source::Flag;
}

bool givenAtAll(const LaunchPlan& plan, const char* key) {
  auto it = plan.config.sources.find(key);
  return it != plan.config.sources.end() && it->second != config::Source::Default;
}

// A rank per scheduler task: the scheduler started every process; this one becomes one rank.
Expected<void> placeTask(LaunchPlan& plan, const SchedulerInfo& s) {
  const config::ClusterConfig& c = plan.config.config;
  if (s.name == "SLURM" && !s.in_step) {
    return makeError(
        "--no_spawn makes each srun task one rank, but this is SLURM's batch script itself (no "
        "SLURM_STEP_ID): run `srun accel launch --no_spawn ...`");
  }
  if (givenAsFlag(plan, "num_processes") && c.num_processes != s.num_tasks) {
    return makeError("--num_processes " + std::to_string(c.num_processes) + " disagrees with " +
                     s.name + ", which started " + std::to_string(s.num_tasks) +
                     " tasks, each one rank (" + s.source + ")");
  }
  for (const char* key : {"num_machines", "machine_rank"}) {
    if (givenAsFlag(plan, key))
      plan.notices.push_back(std::string("--") + key + " is ignored: " + s.name +
                             " places the ranks");
  }
  plan.exec_in_place = true;
  plan.agent_store = false;
  plan.world_size = s.num_tasks;
  plan.local_world_size = s.local_num_tasks;
  plan.num_machines = s.num_nodes;
  plan.machine_rank = s.node_rank;
  plan.exec_local_rank = s.local_task_rank;
  plan.exec_rank = s.task_rank;
  if (c.main_process_ip && givenAsFlag(plan, "main_process_ip")) {
    plan.master_addr = *c.main_process_ip;
  } else if (!s.hosts.empty()) {
    plan.master_addr = s.hosts.front();
    plan.master_addr_from_scheduler = true;
  } else if (s.num_nodes > 1) {
    return makeError(
        "--main_process_ip: required under " + s.name + " across " + std::to_string(s.num_nodes) +
        " nodes (the address of the node that runs rank 0; " + s.name + " does not say)");
  } else {
    plan.master_addr = "127.0.0.1";
  }
  plan.master_port =
      givenAtAll(plan, "main_process_port") && c.main_process_port && *c.main_process_port != 0
          ? *c.main_process_port
          : portForJob(s.job_id);
  return {};
}

// Where this agent's machine stands in the job: flags, else the scheduler, else the file.
Expected<void> placeMachines(LaunchPlan& plan, const LaunchOptions& o,
                             const std::optional<SchedulerInfo>& scheduler, int usableGpus) {
  const config::ClusterConfig& c = plan.config.config;
  plan.num_machines = c.num_machines;
  plan.machine_rank = c.machine_rank;
  plan.world_size = c.num_processes;
  if (c.main_process_ip) plan.master_addr = *c.main_process_ip;
  plan.address_flag = o.address_flag;
  plan.etcd_endpoints = o.etcd_endpoints;
  if (c.main_process_port && *c.main_process_port != 0) plan.master_port = *c.main_process_port;
  if (o.no_spawn && !scheduler) {
    return makeError(
        "--no_spawn: each task's rank comes from its scheduler, but no SLURM step (SLURM_PROCID) "
        "or MPI "
        "launch (OMPI_COMM_WORLD_RANK, PMI_RANK) is visible here");
  }
  if (scheduler) {
    const SchedulerInfo& s = *scheduler;
    plan.scheduler = s.name;
    if (s.job_id) plan.run_id = *s.job_id;
    if (o.no_spawn || s.name != "SLURM") return placeTask(plan, s);
    // SLURM, an agent per node.
    if (!s.in_step && s.num_nodes > 1) {
      return makeError("this SLURM job has " + std::to_string(s.num_nodes) +
                       " nodes but accel launch runs in the batch "
                       "script, on the first one only: start an agent on every node with `srun "
                       "--ntasks-per-node=1 "
                       "accel launch ...`");
    }
    if (s.in_step && s.num_tasks != s.num_nodes) {
      return makeError("srun started " + std::to_string(s.num_tasks) + " tasks on " +
                       std::to_string(s.num_nodes) + " node(s) (" + s.source +
                       "): use --ntasks-per-node=1 for one agent per node, or "
                       "accel launch --no_spawn to make each task one rank");
    }
    if (!givenAsFlag(plan, "num_machines")) plan.num_machines = s.num_nodes;
    if (!givenAsFlag(plan, "machine_rank")) plan.machine_rank = s.node_rank;
    if (*plan.machine_rank >= plan.num_machines) {
      return makeError("machine_rank " + std::to_string(*plan.machine_rank) +
                       " must be below num_machines " + std::to_string(plan.num_machines));
    }
    if (plan.num_machines > 1 && !givenAsFlag(plan, "main_process_ip")) {
      plan.master_addr = s.hosts.front();
      plan.master_addr_from_scheduler = true;
    }
    if (plan.num_machines > 1 && !givenAtAll(plan, "main_process_port"))
      plan.master_port = portForJob(s.job_id);
    if (!givenAtAll(plan, "num_processes")) {
      // One process per GPU SLURM gave this node (when the job uses GPUs), else one per node.
      const int perNode =
          usableGpus > 0 && s.gpus_on_node && *s.gpus_on_node > 0 ? *s.gpus_on_node : 1;
      plan.world_size = perNode * plan.num_machines;
    }
  }
  if (plan.per_machine_processes && !plan.exec_in_place) {
    const int total = *plan.per_machine_processes * plan.num_machines;
    if (o.config.num_processes && *o.config.num_processes != total) {
      return makeError(o.nproc_per_node_flag + " " + *o.nproc_per_node + " on " +
                       std::to_string(plan.num_machines) + " machine(s) is " +
                       std::to_string(total) + " processes, but --num_processes says " +
                       std::to_string(*o.config.num_processes) + " (the total over all machines)");
    }
    plan.world_size = total;
  }
  if (plan.world_size % plan.num_machines != 0) {
    return makeError("num_processes " + std::to_string(plan.world_size) +
                     " is not a multiple of num_machines " + std::to_string(plan.num_machines));
  }
  plan.local_world_size = plan.world_size / plan.num_machines;
  return {};
}

// The distributed types accel launches, and why the others are refused.
Expected<void> checkLaunchable(const LaunchPlan& plan) {
  const config::ClusterConfig& c = plan.config.config;
  const std::string where = plan.config.file ? " (in " + *plan.config.file + ")" : "";
  if (c.compute_environment != config::kLocalMachine) {
    return makeError(
        "compute_environment " + c.compute_environment + where +
        ": accel launches processes on this machine and its peers; SageMaker jobs are started by "
        "accelerate's SageMaker launcher");
  }
  const std::string& type = c.distributed_type;
  if (type == "XLA") {
    return makeError("distributed_type XLA" + where +
                     ": TPU jobs are launched by torch_xla; accel launches CPU and CUDA GPU jobs");
  }
  if (type != config::kDistributedNo && type != config::kDistributedMultiCpu &&
      !config::isGpuDistributedType(type)) {
    return makeError("distributed_type " + type + where +
                     " is not supported by accel, which launches CPU and CUDA GPU jobs "
                     "(NO, MULTI_CPU, MULTI_GPU, FSDP, DEEPSPEED, MEGATRON_LM)");
  }
  return {};
}

// accelerate's launch without a config file: several processes and more than one visible GPU
// turn multi-GPU on ("More than one GPU was found, enabling multi-GPU training").
void autoMultiGpu(LaunchPlan& plan, const std::function<int()>& countGpus) {
  config::ClusterConfig& c = plan.config.config;
  const int processes =
      plan.per_machine_processes ? *plan.per_machine_processes * c.num_machines : c.num_processes;
  if (plan.mode != LaunchMode::Accelerate || plan.config.file || c.use_cpu ||
      c.distributed_type != config::kDistributedNo || processes <= 1 || countGpus() <= 1) {
    return;
  }
  c.distributed_type = config::kDistributedMultiGpu;
  plan.notices.push_back(
      "more than one GPU was found, enabling multi-GPU training (as accelerate does); pass --cpu "
      "or "
      "--num_processes 1 if this was unintended");
}

// Precision and distributed type accel can run, given the GPUs this machine has.
Expected<Devices> checkDevices(LaunchPlan& plan, const std::function<int()>& countGpus) {
  if (auto ok = checkLaunchable(plan); !ok) return std::move(ok).takeError();
  autoMultiGpu(plan, countGpus);
  const config::ClusterConfig& c = plan.config.config;
  Devices d;
  d.gpu = config::isGpuDistributedType(c.distributed_type);
  d.usable_gpus = d.gpu || config::precisionNeedsGpu(c.mixed_precision) ? countGpus() : 0;
  d.launcher = c.distributed_type == "DEEPSPEED" ? AccelerateLauncher::DeepSpeed
               : d.gpu                           ? AccelerateLauncher::MultiGpu
                                                 : AccelerateLauncher::Simple;
  if (config::precisionNeedsGpu(c.mixed_precision) && (c.use_cpu || d.usable_gpus == 0)) {
    return makeError("mixed_precision " + c.mixed_precision + " needs a GPU" +
                     std::string(c.use_cpu ? " but the job is CPU-only (--cpu / use_cpu)"
                                           : " and none is usable here") +
                     "; use bf16 or no");
  }
  return d;
}

// --nproc_per_node, torchrun's count per machine: N, or counted (auto: GPUs, else CPUs).
Expected<void> resolvePerMachine(LaunchPlan& plan, const LaunchOptions& o,
                                 const std::function<int()>& countGpus) {
  if (!o.nproc_per_node) return {};
  const std::string& n = *o.nproc_per_node;
  const int cpus = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  int count = 0;
  if (n == "cpu") {
    count = cpus;
  } else if (n == "gpu" || n == "auto") {
    const int gpus = countGpus();
    if (n == "gpu" && gpus == 0)
      return makeError("--nproc_per_node gpu: no GPU is usable on this machine");
    count = gpus > 0 ? gpus : cpus;
  } else {
    count = std::stoi(n);
  }
  plan.per_machine_processes = count;
  return {};
}

// Agents of several machines meet at one address and port.
Expected<void> checkMultiMachine(const LaunchPlan& plan) {
  if (plan.num_machines <= 1 || plan.exec_in_place || plan.etcd_endpoints) return {};
  if (!plan.config.config.main_process_ip && !plan.master_addr_from_scheduler) {
    return makeError("--main_process_ip: required with --num_machines " +
                     std::to_string(plan.num_machines) +
                     " (the address of machine_rank 0, which hosts the job's store)");
  }
  if (!plan.master_port) {
    return makeError("--main_process_port: required with --num_machines " +
                     std::to_string(plan.num_machines) + " (every machine must use the same port)");
  }
  return {};
}

// --rdzv_backend etcd/etcd-v2 across machines: the rounds live in etcd (--rdzv_endpoint), every
// machine ranked by arrival.
Expected<void> planEtcd(LaunchPlan& plan) {
  const std::string& backend = plan.config.config.rdzv_backend;
  if (!plan.etcd_endpoints && plan.config.config.main_process_ip && plan.master_port) {
    // A config file's etcd job (accelerate's): etcd at the main process's address and port.
    plan.etcd_endpoints = plan.master_addr + ":" + std::to_string(*plan.master_port);
  }
  if (!plan.etcd_endpoints) {
    return makeError("--rdzv_backend " + backend +
                     " needs --rdzv_endpoint HOST:PORT[,HOST:PORT...]: the client URLs of the etcd "
                     "cluster the machines meet on");
  }
  if (plan.machine_rank && givenAtAll(plan, "machine_rank")) {
    plan.notices.push_back("--node_rank/--machine_rank " + std::to_string(*plan.machine_rank) +
                           " has no effect with --rdzv_backend " + backend +
                           ": the machines are ranked in the order they join");
  }
  plan.rank_by_arrival = true;
  plan.machine_rank = std::nullopt;
  plan.rendezvous_notice = "--rdzv_backend " + backend + ": the machines meet on etcd at " +
                           *plan.etcd_endpoints +
                           " (etcd's v3 API), ranked in the order they join; no machine is a "
                           "single point of failure";
  return {};
}

// torchrun's elastic command line across machines: --rdzv_backend c10d without --node_rank
// ranks the machines by arrival (the endpoint's host is machine 0; planner.cc decides which that
// is). On etcd every machine is ranked by arrival (as torch's etcd backends do).
Expected<void> planArrivalRanks(LaunchPlan& plan) {
  const std::string& backend = plan.config.config.rdzv_backend;
  if (plan.num_machines > 1 && !plan.exec_in_place && !plan.scheduler &&
      (backend == "etcd" || backend == "etcd-v2")) {
    return planEtcd(plan);
  }
  if (plan.scheduler && plan.num_machines > 1 && (backend == "etcd" || backend == "etcd-v2") &&
      plan.config.sources["rdzv_backend"] == config::Source::Flag) {
    plan.notices.push_back("--rdzv_backend " + backend + " has no effect under " + *plan.scheduler +
                           ": " + *plan.scheduler +
                           " gives each machine its rank, and the job's store is machine 0's");
  }
  plan.etcd_endpoints.reset();
  if (backend == "c10d" && !plan.master_port && plan.num_machines > 1)
    plan.master_port = kDefaultC10dPort;
  if (plan.num_machines <= 1 || plan.exec_in_place || plan.scheduler || backend == "static" ||
      givenAtAll(plan, "machine_rank")) {
    return {};
  }
  if (backend != "c10d") {
    return makeError("--rdzv_backend " + backend + " across " + std::to_string(plan.num_machines) +
                     " machines needs --node_rank (or --machine_rank) on each (or use "
                     "--rdzv_backend c10d or etcd, which rank them by arrival)");
  }
  plan.rank_by_arrival = true;
  plan.machine_rank = std::nullopt;  // the rendezvous ranks this machine
  return {};
}

// The GPU modes: distributed_type → what the user would call it, and its launch flag.
const std::map<std::string, std::pair<const char*, const char*>>& gpuModes() {
  static const std::map<std::string, std::pair<const char*, const char*>> kModes = {
      {"MULTI_GPU", {"multi-GPU training", "--multi_gpu"}},
      {"FSDP", {"FSDP", "--use_fsdp"}},
      {"DEEPSPEED", {"DeepSpeed", "--use_deepspeed"}},
      {"MEGATRON_LM", {"Megatron-LM", "--use_megatron_lm"}}};
  return kModes;
}

// The flag that asked for the GPU mode ("--use_fsdp"), or nullopt when the config file did.
std::optional<std::string> gpuModeFlag(const config::EffectiveConfig& e) {
  const auto it = gpuModes().find(e.config.distributed_type);
  const auto source = e.sources.find("distributed_type");
  if (it == gpuModes().end() || source == e.sources.end() ||
      source->second != config::Source::Flag) {
    return std::nullopt;
  }
  return it->second.second;
}

// The GPU mode asked for, in the user's words: "FSDP was requested (--use_fsdp)",
// "DeepSpeed was requested (distributed_type DEEPSPEED in cfg.yaml)".
std::string gpuModeRequested(const config::EffectiveConfig& e) {
  const std::string& type = e.config.distributed_type;
  const auto it = gpuModes().find(type);
  const std::string name = it != gpuModes().end() ? it->second.first : type;
  const std::string where =
      gpuModeFlag(e).value_or("distributed_type " + type + " in " + e.file.value_or("the config"));
  return name + " was requested (" + where + ")";
}

// A multi-GPU job needs a GPU per local process, among those gpu_ids allows.
Expected<void> checkGpuCount(LaunchPlan& plan, const Devices& d) {
  if (!d.gpu) return {};
  const config::ClusterConfig& c = plan.config.config;
  int available = d.usable_gpus;
  if (c.gpu_ids && *c.gpu_ids != "all") available = std::min(available, countGpuIds(*c.gpu_ids));
  if (d.usable_gpus == 0) {
    // A GPU mode's flag and --cpu cannot be given together: say which one to drop.
    const auto flag = gpuModeFlag(plan.config);
    return makeError(gpuModeRequested(plan.config) +
                     " but no GPU is usable on this machine; use --cpu" +
                     (flag ? " instead of " + *flag : ""));
  }
  if (plan.local_world_size > available) {
    return makeError("num_processes " + std::to_string(plan.local_world_size) +
                     " on this machine is more than the " + std::to_string(available) +
                     " GPU(s) available" +
                     (c.gpu_ids && *c.gpu_ids != "all" ? " in gpu_ids " + *c.gpu_ids : "") +
                     "; lower --num_processes or use --cpu");
  }
  return {};
}

// accelerate's warning when it launches without a config file (_validate_launch_command): the
// values no flag gave, with the defaults used. accel's num_processes default is one process.
void noticeDefaults(LaunchPlan& plan, const LaunchOptions& o) {
  if (plan.mode != LaunchMode::Accelerate || plan.config.file || plan.scheduler) return;
  const config::ClusterConfig& c = plan.config.config;
  std::vector<std::string> warned;
  auto defaulted = [&](const char* key, const std::string& value) {
    if (!givenAtAll(plan, key))
      warned.push_back(std::string("\t`--") + key + "` was set to a value of `" + value + "`");
  };
  defaulted("num_processes", std::to_string(plan.world_size));
  defaulted("num_machines", std::to_string(plan.num_machines));
  defaulted("mixed_precision", "'" + c.mixed_precision + "'");
  if (!o.accelerate.isGiven("dynamo_backend"))
    warned.push_back("\t`--dynamo_backend` was set to a value of `'no'`");
  if (warned.empty()) return;
  std::string text =
      "The following values were not passed to `accel launch` and had defaults used instead:";
  for (const auto& line : warned) text += "\n" + line;
  text +=
      "\nTo avoid this warning pass in values for each of the problematic parameters or run "
      "`accel config`.";
  plan.defaults_notice = std::move(text);
}

// The config file (accel launch) or torchrun's defaults (accel run), under the flags.
// A count per machine (--nproc_per_node) stands for the total it makes with the machines given;
// torchrun's is 1 when not given (`torchrun --nnodes 2 train.py`: one process on each machine).
Expected<config::EffectiveConfig> effectiveConfig(const LaunchOptions& o,
                                                  const config::PathEnv& paths,
                                                  std::optional<int> perMachine) {
  config::ConfigOverrides flags = o.config;
  if (o.mode == LaunchMode::Torchrun && !perMachine) perMachine = 1;
  if (perMachine && !flags.num_processes)
    flags.num_processes = *perMachine * flags.num_machines.value_or(1);
  if (o.mode == LaunchMode::Torchrun) {
    config::EffectiveConfig base;
    base.config = config::builtinDefaults();
    return config::applyOverrides(std::move(base), flags);
  }
  return config::resolveEffectiveConfig(flags, paths);
}

// --nnodes MIN:MAX: a group of MIN to MAX machines, re-formed as they come and go. Their ranks
// come from the order in which they join (a machine rank asked for could be one the group no
// longer has).
Expected<void> planMembership(LaunchPlan& plan, const LaunchOptions& o) {
  plan.min_machines = std::min(o.min_machines.value_or(plan.num_machines), plan.num_machines);
  if (!plan.elastic() || plan.rank_by_arrival) return {};
  return makeError("--nnodes " + std::to_string(plan.min_machines) + ":" +
                   std::to_string(plan.num_machines) +
                   ": a group of machines that changes needs machines ranked by arrival "
                   "(--rdzv_backend c10d with --rdzv_endpoint, and no --node_rank/--machine_rank)");
}

// The planning steps before anything about the command: config, devices, machines.
Expected<Devices> planJobShape(LaunchPlan& plan, const LaunchOptions& o,
                               const probes::Environment& env, const std::function<int()>& gpus,
                               std::optional<SchedulerInfo>& schedulerOut) {
  auto devices = checkDevices(plan, gpus);
  if (!devices) return devices;
  auto scheduler = detectScheduler(env);
  if (!scheduler) return makeError("cannot use the scheduler's environment: " + scheduler.error());
  schedulerOut = *scheduler;
  if (auto ok = placeMachines(plan, o, *scheduler, devices->gpu ? devices->usable_gpus : 0); !ok)
    return std::move(ok).takeError();
  if (auto ok = planArrivalRanks(plan); !ok) return std::move(ok).takeError();
  if (auto ok = planMembership(plan, o); !ok) return std::move(ok).takeError();
  if (o.mode == LaunchMode::Torchrun && plan.num_machines > 1 && !plan.master_port)
    plan.master_port = kDefaultMasterPort;
  if (auto ok = checkMultiMachine(plan); !ok) return std::move(ok).takeError();
  if (auto ok = checkGpuCount(plan, *devices); !ok) return std::move(ok).takeError();
  return devices;
}

}  // namespace

int LaunchPlan::fileStreams(int lr) const {
  if (log_dir) return kStdoutMask | kStderrMask;
  const auto at = static_cast<size_t>(lr);
  return (at < redirects.size() ? redirects[at] : 0) | (at < tee.size() ? tee[at] : 0);
}

int LaunchPlan::consoleStreams(int lr) const {
  if (console_ranks && !console_ranks->count(lr)) return 0;
  const auto at = static_cast<size_t>(lr);
  const int redirected = at < redirects.size() ? redirects[at] : 0;
  const int teed = at < tee.size() ? tee[at] : 0;
  return console_streams & (~redirected | teed);
}

bool LaunchPlan::keepsFiles() const {
  for (int lr = 0; lr < local_world_size; ++lr) {
    if (fileStreams(lr) != 0) return true;
  }
  return false;
}

int portForJob(const std::optional<std::string>& jobId) {
  const auto id = jobId ? parseDigits(*jobId, 999999999999999999) : std::nullopt;
  if (!id) return kDefaultMasterPort;
  return 20000 + static_cast<int>(*id % 10000);
}

Expected<LaunchPlan> makeLaunchPlan(const LaunchOptions& o, const config::PathEnv& paths,
                                    const probes::Environment& env,
                                    const std::function<int()>& countGpus) {
  std::optional<int> counted;
  const std::function<int()> gpus = [&]() {
    if (!counted) counted = o.dry_run_gpus ? *o.dry_run_gpus : countGpus();
    return *counted;
  };
  LaunchPlan plan;
  if (auto ok = resolvePerMachine(plan, o, gpus); !ok) return std::move(ok).takeError();
  auto effective = effectiveConfig(o, paths, plan.per_machine_processes);
  if (!effective) return std::move(effective).takeError();
  plan.config = std::move(*effective);
  plan.mode = o.mode;
  plan.notices = o.notices;
  std::optional<SchedulerInfo> scheduler;
  auto devices = planJobShape(plan, o, env, gpus, scheduler);
  if (!devices) return std::move(devices).takeError();
  noticeDefaults(plan, o);
  auto argv = resolveCommand(plan, o, env);
  if (!argv) return std::move(argv).takeError();
  plan.argv = std::move(*argv);
  if (auto ok = applyAgentFlags(plan, o); !ok) return std::move(ok).takeError();
  if (auto ok = applyShutdownTimeoutEnv(plan, o, env); !ok) return std::move(ok).takeError();
  chooseRunId(plan, o);
  if (auto ok = setCommonEnv(plan, o, env, *devices); !ok) return std::move(ok).takeError();
  if (auto ok = assignVirtualDevices(plan, o, env); !ok) return std::move(ok).takeError();
  chooseOmpThreads(plan, o, env, scheduler);
  // After applyShutdownTimeoutEnv: the round's close and exit bounds follow --term_timeout.
  if (auto ok = applyRendezvousFlags(plan, o); !ok) return std::move(ok).takeError();
  applyWatchdogTimeouts(plan, o);
  plan.dry_run_json = o.dry_run_json;
  plan.local_addr = o.local_addr;
  return plan;
}

Placement staticPlacement(const LaunchPlan& plan, int storePort) {
  Placement p;
  p.machine_rank = plan.machine_rank.value_or(0);
  p.num_machines = plan.num_machines;
  p.world_size = plan.world_size;
  p.rank_offset = plan.exec_in_place ? plan.exec_rank - plan.exec_local_rank
                                     : p.machine_rank * plan.local_world_size;
  p.master_addr = plan.master_addr;
  p.master_port = storePort;
  return p;
}

}  // namespace accel::launcher
