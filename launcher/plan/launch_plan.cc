#include "launcher/plan/launch_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <tuple>

#include "config/schema.h"
#include "launcher/base/defaults.h"
#include "launcher/base/numbers.h"
#include "launcher/base/text.h"
#include "launcher/plan/stream_masks.h"
#include "launcher/plan/worker_env.h"
#include "libaccel/common/env_names.h"
#include "libaccel/store/tcp_store_server.h"
#include "probes/run_program.h"
#include "probes/scheduler_env.h"
#include "probes/system_info.h"

namespace accel::launcher {

// The vocabulary of the machine's environment comes from probes/.
using probes::detectScheduler;
using probes::findInPath;
using probes::SchedulerInfo;
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string absolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// A fresh id for TORCHELASTIC_RUN_ID (torchrun's default "none" lets separate jobs collide).
std::string newRunId() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned> digit(0, 15);
  std::string id = "accel-";
  for (int i = 0; i < 12; ++i) id += "0123456789abcdef"[digit(rd)];
  return id;
}

// The argv every rank runs, with argv[0] resolved to a path.
Expected<std::vector<std::string>> resolveCommand(const LaunchOptions& o,
                                                  const probes::Environment& env) {
  if (o.command.empty())
    return makeError("no training script given: accel launch [flags] SCRIPT [args...]");
  const std::string& target = o.command[0];
  std::vector<std::string> argv;
  auto pythonCommand = [&]() -> Expected<std::string> {
    std::string python =
        o.python ? *o.python : probes::lookup(env, "PYTHON_EXEC").value_or("python3");
    std::string path = findInPath(python);
    if (path.empty()) {
      return makeError("python interpreter '" + python +
                       "' not found in PATH (set --python or PYTHON_EXEC)");
    }
    return path;
  };

  if (o.module) {
    if (o.no_python) return makeError("-m/--module and --no_python cannot be used together");
    auto python = pythonCommand();
    if (!python) return std::move(python).takeError();
    argv = {*python, "-u", "-m"};
  } else if (o.run_path || (!o.no_python && endsWith(target, ".py"))) {
    struct stat st {};
    if (::stat(target.c_str(), &st) != 0)
      return makeError("training script '" + target + "' not found");
    if (S_ISDIR(st.st_mode)) return makeError("training script '" + target + "' is a directory");
    if (::access(target.c_str(), R_OK) != 0)
      return makeError("training script '" + target + "' is not readable");
    auto python = pythonCommand();
    if (!python) return std::move(python).takeError();
    argv = {*python, "-u", absolutePath(target)};
    argv.insert(argv.end(), o.command.begin() + 1, o.command.end());
    return argv;
  } else {
    std::string path = findInPath(target);
    if (path.empty()) {
      struct stat st {};
      bool exists =
          target.find('/') != std::string::npos ? ::stat(target.c_str(), &st) == 0 : false;
      if (exists && !S_ISDIR(st.st_mode)) {
        return makeError("training script '" + target +
                         "' is not executable (chmod +x it, or give a .py file)");
      }
      return makeError(
          "training script '" + target + "' not found" +
          (target.find('/') == std::string::npos ? " (not a file here and not in PATH)" : ""));
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return makeError("training script '" + target + "' is a directory");
    }
    argv = {absolutePath(path)};
    argv.insert(argv.end(), o.command.begin() + 1, o.command.end());
    return argv;
  }
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

Expected<std::set<int>> parseRankFilter(const std::string& text, int localWorldSize) {
  std::set<int> ranks;
  for (std::string_view view : splitOn(text, ',')) {
    const std::string item(view);
    const auto rank = parseDigits(item, localWorldSize - 1);
    if (!rank) {
      return makeError("--local_ranks_filter: '" + item + "' is not a local rank (0.." +
                       std::to_string(localWorldSize - 1) + ")");
    }
    ranks.insert(static_cast<int>(*rank));
  }
  return ranks;
}

// What accel reads of torchrun's --rdzv_conf k=v,...: the rendezvous timeout (timeout=, or
// join_timeout= as torch's c10d backend spells it) and is_host= (torch's booleans).
struct RdzvConf {
  std::optional<double> timeout_s;
  std::optional<bool> is_host;
};

Expected<RdzvConf> parseRdzvConf(const std::string& text) {
  RdzvConf conf;
  for (std::string_view view : splitOn(text, ',')) {
    const std::string item(view);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq),
                      value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "timeout" || key == "join_timeout") {
      char* end = nullptr;
      conf.timeout_s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0')
        return makeError("--rdzv_conf: '" + item + "' is not " + key + "=SECONDS");
    } else if (key == "is_host") {
      const std::string v = lowerCase(value);
      if (v == "1" || v == "true" || v == "t" || v == "yes" || v == "y") {
        conf.is_host = true;
      } else if (v == "0" || v == "false" || v == "f" || v == "no" || v == "n") {
        conf.is_host = false;
      } else {
        return makeError("--rdzv_conf: '" + item + "' is not is_host=true|false");
      }
    }
  }
  return conf;
}

// --rdzv_timeout, else timeout= in --rdzv_conf (torchrun's spelling), else 900 s.
Expected<std::chrono::milliseconds> rdzvTimeout(const LaunchOptions& o, const RdzvConf& conf) {
  const double seconds = o.rdzv_timeout_s.value_or(conf.timeout_s.value_or(900));
  if (!(seconds > 0)) return makeError("--rdzv_timeout: must be more than 0 seconds");
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

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

// The GPU facts the plan depends on, known once the config is resolved.
struct Devices {
  bool gpu = false;     // a GPU job: MULTI_GPU, FSDP, DEEPSPEED or MEGATRON_LM
  int usable_gpus = 0;  // counted only when GPUs matter
  AccelerateLauncher launcher = AccelerateLauncher::Simple;
};

bool isGpuType(const std::string& type) {
  return type == config::kDistributedMultiGpu || type == "FSDP" || type == "DEEPSPEED" ||
         type == "MEGATRON_LM";
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
  if (type != config::kDistributedNo && type != config::kDistributedMultiCpu && !isGpuType(type)) {
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
  d.gpu = isGpuType(c.distributed_type);
  d.usable_gpus = d.gpu || c.mixed_precision == "fp16" ? countGpus() : 0;
  d.launcher = c.distributed_type == "DEEPSPEED" ? AccelerateLauncher::DeepSpeed
               : d.gpu                           ? AccelerateLauncher::MultiGpu
                                                 : AccelerateLauncher::Simple;
  if (c.mixed_precision == "fp16" && (c.use_cpu || d.usable_gpus == 0)) {
    return makeError("mixed_precision fp16 needs a GPU" +
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

// Agents of several machines meet at one address and port, and cannot restart together yet.
Expected<void> checkMultiMachine(const LaunchPlan& plan, const LaunchOptions& o) {
  if (plan.num_machines <= 1 || plan.exec_in_place) return {};
  if (!plan.config.config.main_process_ip && !plan.master_addr_from_scheduler) {
    return makeError("--main_process_ip: required with --num_machines " +
                     std::to_string(plan.num_machines) +
                     " (the address of machine_rank 0, which hosts the job's store)");
  }
  if (!plan.master_port) {
    return makeError("--main_process_port: required with --num_machines " +
                     std::to_string(plan.num_machines) + " (every machine must use the same port)");
  }
  if (o.max_restarts > 0)
    return makeError("--max_restarts: restarts of multi-machine jobs are not supported yet");
  return {};
}

// torchrun's elastic command line across machines: --rdzv_backend c10d without --node_rank
// ranks the machines by arrival (the endpoint's host is machine 0; planner.cc decides which that
// is). etcd has no server here, so its machines need their ranks.
Expected<void> planArrivalRanks(LaunchPlan& plan) {
  const std::string& backend = plan.config.config.rdzv_backend;
  if (backend == "c10d" && !plan.master_port && plan.num_machines > 1)
    plan.master_port = kDefaultC10dPort;
  if (plan.num_machines <= 1 || plan.exec_in_place || plan.scheduler || backend == "static" ||
      givenAtAll(plan, "machine_rank")) {
    return {};
  }
  if (backend != "c10d") {
    return makeError("--rdzv_backend " + backend + " across " + std::to_string(plan.num_machines) +
                     " machines needs --node_rank (or --machine_rank) on each: accel has no etcd "
                     "rendezvous, so the "
                     "machines meet at machine 0's store as with static (or use --rdzv_backend "
                     "c10d, which ranks them "
                     "by arrival)");
  }
  plan.rank_by_arrival = true;
  plan.machine_rank = std::nullopt;  // the rendezvous ranks this machine
  return {};
}

// A multi-GPU job needs a GPU per local process, among those gpu_ids allows.
Expected<void> checkGpuCount(LaunchPlan& plan, const Devices& d) {
  if (!d.gpu) return {};
  const config::ClusterConfig& c = plan.config.config;
  int available = d.usable_gpus;
  if (c.gpu_ids && *c.gpu_ids != "all") available = std::min(available, countGpuIds(*c.gpu_ids));
  if (d.usable_gpus == 0) {
    return makeError("multi-GPU training was requested (" +
                     std::string(plan.config.sources["distributed_type"] == config::Source::Flag
                                     ? "--multi_gpu"
                                     : "distributed_type MULTI_GPU in " +
                                           plan.config.file.value_or("the config")) +
                     ") but no GPU is usable on this machine; use --cpu");
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

// "128M", "1G", "65536": a size in bytes (K, M, G are powers of 1024; "KiB"/"MB" spellings too).
Expected<uint64_t> parseByteSize(const std::string& flag, const std::string& text) {
  size_t end = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  const std::string unit = upperCase(text.substr(end));
  const std::vector<std::pair<std::vector<std::string>, int>> units = {
      {{"", "B"}, 0}, {{"K", "KB", "KIB"}, 10}, {{"M", "MB", "MIB"}, 20}, {{"G", "GB", "GIB"}, 30}};
  for (const auto& [names, shift] : units) {
    if (end == 0 || std::find(names.begin(), names.end(), unit) == names.end()) continue;
    if (value > (~0ull >> shift)) break;
    return static_cast<uint64_t>(value) << shift;
  }
  return makeError(flag + ": '" + text + "' is not a size (bytes, or a number with K, M or G)");
}

// The job store's memory bounds; the store needs room for one request of the longest value.
Expected<void> applyStoreLimits(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.store_connection_input_limit) {
    auto bytes = parseByteSize("--store_connection_input_limit", *o.store_connection_input_limit);
    if (!bytes) return std::move(bytes).takeError();
    plan.store_connection_input_bytes = *bytes;
  }
  if (o.store_input_budget) {
    auto bytes = parseByteSize("--store_input_budget", *o.store_input_budget);
    if (!bytes) return std::move(bytes).takeError();
    plan.store_input_budget_bytes = *bytes;
  }
  const uint64_t least = store::TcpStoreServerOptions{}.leastConnectionInputBytes();
  if (plan.store_connection_input_bytes < least) {
    return makeError("--store_connection_input_limit: must be at least " + std::to_string(least) +
                     " bytes (64 MiB, the longest value the store takes, plus 1 KiB)");
  }
  if (plan.store_input_budget_bytes < plan.store_connection_input_bytes) {
    return makeError(
        "--store_input_budget: " + std::to_string(plan.store_input_budget_bytes) +
        " bytes is less than one connection may hold (--store_connection_input_limit " +
        std::to_string(plan.store_connection_input_bytes) + ")");
  }
  return {};
}

// The numeric ranges were checked where the flags were read (cli/options_from_flags.cc); what
// depends on the job's size is checked here.
Expected<void> applyAgentFlags(LaunchPlan& plan, const LaunchOptions& o) {
  plan.console_streams = o.console_streams.value_or(3);
  for (auto [flag, text, masks] : {std::tuple{"--redirects", &o.redirects, &plan.redirects},
                                   std::tuple{"--tee", &o.tee, &plan.tee}}) {
    auto parsed = parseStreamMasks(flag, text->value_or("0"), plan.local_world_size);
    if (!parsed) return std::move(parsed).takeError();
    *masks = std::move(*parsed);
  }
  if (o.local_ranks_filter) {
    auto ranks = parseRankFilter(*o.local_ranks_filter, plan.local_world_size);
    if (!ranks) return std::move(ranks).takeError();
    plan.console_ranks = std::move(*ranks);
  }
  plan.max_restarts = o.max_restarts;
  plan.role = o.role;
  // The run id names the log directory (<run_id>_<random>): one path component.
  if (o.rdzv_id && (o.rdzv_id->empty() || o.rdzv_id->find('/') != std::string::npos)) {
    return makeError("--rdzv_id: '" + *o.rdzv_id + "' must be a non-empty name without '/'");
  }
  plan.log_dir = o.log_dir;
  // A rank per task: only rank 0 speaks for the job (hundreds of tasks must not repeat it).
  plan.quiet = o.quiet || (plan.exec_in_place && plan.exec_rank != 0);
  plan.dry_run = o.dry_run;
  plan.term_timeout = o.term_timeout;
  return applyStoreLimits(plan, o);
}

// Every machine of a job must agree on the run id without talking: the scheduler's job id, or
// one derived from the shared store address.
void chooseRunId(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.rdzv_id) plan.run_id = *o.rdzv_id;
  if (!plan.run_id.empty()) return;
  plan.run_id = plan.num_machines > 1 ? "accel-" + plan.master_addr + "-" +
                                            std::to_string(plan.master_port.value_or(0))
                                      : newRunId();
}

// accelerate's CPU jobs with an mpirun hostfile (flag or mpirun_config): the one process the
// agent starts is mpirun, given the workers' command as accelerate's simple launcher builds it;
// each MPI process reads its rank from MPI's variables, as under accelerate.
Expected<void> wrapInMpirun(LaunchPlan& plan, const AccelerateArgs& args) {
  auto hostfile = args.find("mpirun_hostfile");
  if (hostfile == args.end() || !hostfile->second.is_string() ||
      plan.mode != LaunchMode::Accelerate)
    return {};
  if (plan.accelerate_launcher != AccelerateLauncher::Simple || plan.exec_in_place) {
    plan.notices.push_back("mpirun_hostfile is ignored: accelerate runs mpirun for CPU jobs only");
    return {};
  }
  std::string app = findInPath("mpirun");
  if (app.empty()) app = findInPath("mpiexec");
  if (app.empty())
    return makeError(
        "--mpirun_hostfile: mpirun or mpiexec were not found in PATH (install Open MPI, Intel MPI "
        "or MVAPICH)");
  auto version = probes::runCaptured({app, "--version"}, std::chrono::seconds(10));
  if (!version) return makeError("--mpirun_hostfile: " + version.error());
  const bool openMpi = version->output.find("Open MPI") != std::string::npos;
  const int perMachine = plan.world_size / std::max(plan.num_machines, 1);
  std::vector<std::string> cmd = {app,
                                  openMpi ? "--hostfile" : "-f",
                                  hostfile->second.get<std::string>(),
                                  openMpi ? "--npernode" : "-ppn",
                                  std::to_string(perMachine),
                                  "-n",
                                  std::to_string(plan.world_size)};
  if (openMpi) cmd.insert(cmd.end(), {"--bind-to", "socket"});
  cmd.insert(cmd.end(), plan.argv.begin(), plan.argv.end());
  plan.argv = std::move(cmd);
  plan.world_size = plan.local_world_size =
      1;  // the agent supervises mpirun, which starts the ranks
  plan.torchrun_env = false;
  return {};
}

// DeepSpeed's multi-node launchers other than 'standard' fan out over ssh from one machine.
void deepspeedLauncherNotice(LaunchPlan& plan, const AccelerateArgs& args) {
  if (plan.accelerate_launcher != AccelerateLauncher::DeepSpeed || plan.num_machines <= 1) return;
  auto launcher = args.find("deepspeed_multinode_launcher");
  const std::string name = launcher != args.end() && launcher->second.is_string()
                               ? launcher->second.get<std::string>()
                               : "pdsh";
  if (name == "standard") return;
  plan.notices.push_back(
      "deepspeed_multinode_launcher " + name +
      ": DeepSpeed's own multi-node launcher (ssh fan-out from "
      "one machine) is out of scope for accel; this agent runs machine " +
      (plan.machine_rank ? std::to_string(*plan.machine_rank) : std::string("N")) +
      "'s ranks as 'standard' does, so start accel launch on every machine (or under srun)");
}

// What accelerate's environment depends on, from the plan.
AccelerateFacts accelerateFacts(const LaunchPlan& plan, const Devices& d) {
  const config::ClusterConfig& c = plan.config.config;
  AccelerateFacts f;
  f.launcher = d.launcher;
  f.use_cpu = c.use_cpu;
  f.debug = c.debug;
  f.enable_cpu_affinity = c.enable_cpu_affinity;
  f.mixed_precision = c.mixed_precision;
  // accelerate's mp_from_config_flag: the file holds mixed_precision and no flag overrode it.
  auto mp = plan.config.sources.find("mixed_precision");
  f.mixed_precision_from_config =
      mp != plan.config.sources.end() && mp->second == config::Source::File;
  f.gpu_ids = c.gpu_ids;
  if (!f.gpu_ids && plan.config.file) f.gpu_ids = "all";
  f.num_processes = plan.world_size;
  f.num_machines = plan.num_machines;
  f.main_process_ip = c.main_process_ip;
  f.main_process_port = c.main_process_port;
  char cwd[4096];
  f.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : ".";
  // Only CPU jobs' OMP_NUM_THREADS depends on it: other launches never read /proc/cpuinfo.
  if (c.use_cpu) f.physical_cores = probes::countPhysicalCores();
  if (auto ds = c.extras.find("deepspeed_config"); ds != c.extras.end() && ds->second.is_object()) {
    for (const auto& item : ds->second.items()) f.deepspeed_config_keys.push_back(item.key());
  }
  return f;
}

// The workers' common environment: accelerate's variables (accel launch), and NCCL's async
// error handling unless the user chose.
Expected<void> setCommonEnv(LaunchPlan& plan, const LaunchOptions& o,
                            const probes::Environment& env, const Devices& d) {
  auto& e = plan.common_env;
  plan.accelerate_launcher = d.launcher;
  plan.torchrun_env = true;
  if (plan.mode == LaunchMode::Accelerate) {
    AccelerateArgs args = accelerateArgs(o.accelerate, plan.config.config);
    const std::string& type = plan.config.config.distributed_type;
    args["use_fsdp"] = type == "FSDP";
    args["use_megatron_lm"] = type == "MEGATRON_LM";
    args["use_deepspeed"] = type == "DEEPSPEED";
    if (!o.accelerate.isGiven("use_parallelism_config") && plan.config.file) {
      auto pc = plan.config.config.extras.find("parallelism_config");
      args["use_parallelism_config"] =
          pc != plan.config.config.extras.end() && pc->second.is_object() && !pc->second.empty();
    }
    auto vars = accelerateEnvironment(args, accelerateFacts(plan, d), env);
    if (!vars) return std::move(vars).takeError();
    e = std::move(*vars);
    deepspeedLauncherNotice(plan, args);
    if (auto ok = wrapInMpirun(plan, args); !ok) return ok;
    // accel's own C++ workers read the steps on every job type (accelerate passes them to DeepSpeed
    // only).
    if (o.gradient_accumulation_steps)
      e[env::kGradientAccumulationSteps] = std::to_string(*o.gradient_accumulation_steps);
  }
  // accelerate starts a single process without torchrun's variables (its simple launcher).
  plan.torchrun_env =
      plan.torchrun_env &&
      !(plan.mode == LaunchMode::Accelerate && d.launcher == AccelerateLauncher::Simple &&
        plan.world_size == 1 && plan.num_machines == 1 && !plan.exec_in_place);
  // torchrun's agent turns NCCL's async error handling on for its workers (both names: torch 1.13's
  // and 2.x's).
  for (const char* key : {env::kTorchNcclAsyncErrorHandling, env::kNcclAsyncErrorHandling}) {
    if (plan.torchrun_env && !probes::lookup(env, key)) e[key] = "1";
  }
  // Python workers print every thread's stack on SIGABRT, which the agent sends when it finds
  // the job hung (--hang_timeout, --exit_timeout); the user's own choice stands.
  if (!probes::lookup(env, env::kPythonFaultHandler)) e[env::kPythonFaultHandler] = "1";
  return {};
}

// OMP_NUM_THREADS for the workers: the flag; else the user's; else accelerate's choice (in the
// common environment); pinned ranks (--enable_cpu_affinity) each their cores, chosen with the sets
// (assignCpuAffinity); a scheduler's CPUs shared out; torchrun's 1 when several processes would
// otherwise each take every core.
void chooseOmpThreads(LaunchPlan& plan, const LaunchOptions& o, const probes::Environment& env,
                      const std::optional<SchedulerInfo>& scheduler) {
  auto chosen = plan.common_env.find(env::kOmpNumThreads);
  if (chosen != plan.common_env.end()) {
    plan.omp_num_threads = std::stoi(chosen->second);
    plan.common_env.erase(chosen);
  }
  if (o.num_cpu_threads_per_process) {
    plan.omp_num_threads = *o.num_cpu_threads_per_process;
    return;
  }
  if (probes::lookup(env, env::kOmpNumThreads)) return;
  if (plan.config.config.enable_cpu_affinity && !plan.exec_in_place) {
    plan.omp_from_affinity = true;  // each pinned rank gets its cores (assignCpuAffinity)
    return;
  }
  if (scheduler && scheduler->cpus_on_node) {
    plan.omp_num_threads = std::max(1, *scheduler->cpus_on_node / plan.local_world_size);
    plan.notices.push_back(
        std::string(env::kOmpNumThreads) + "=" + std::to_string(*plan.omp_num_threads) +
        " for each of the " + std::to_string(plan.local_world_size) + " processes on this node (" +
        scheduler->name + " gives it " + std::to_string(*scheduler->cpus_on_node) + " CPUs)");
  } else if (!plan.omp_num_threads && plan.local_world_size > 1) {
    plan.omp_num_threads = 1;  // torchrun's rule (accel run, DeepSpeed)
  }
  plan.omp_notice = plan.omp_num_threads && plan.local_world_size > 1;
}

// --hang_timeout and --exit_timeout, else the config file's keys of the same names (accel's
// own: accelerate does not know them), in seconds.
void applyWatchdogTimeouts(LaunchPlan& plan, const LaunchOptions& o) {
  const auto& extras = plan.config.config.extras;
  for (auto [name, flag, field] :
       {std::tuple{"hang_timeout", o.hang_timeout_s, &plan.hang_timeout},
        std::tuple{"exit_timeout", o.exit_timeout_s, &plan.exit_timeout}}) {
    std::optional<double> seconds = flag;
    if (auto it = extras.find(name); !seconds && it != extras.end() && it->second.is_number()) {
      seconds = it->second.get<double>();  // the schema has checked it is at least 1
    }
    if (seconds) *field = std::chrono::milliseconds(static_cast<long long>(*seconds * 1000));
  }
}

// How long agents wait for each other, and notices for torchrun flags that do nothing here.
Expected<void> applyRendezvousFlags(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.monitor_interval != 0.1) {
    plan.notices.push_back(
        "--monitor_interval is ignored: accel reacts to worker exits as they happen");
  }
  auto conf = parseRdzvConf(o.rdzv_conf);
  if (!conf) return std::move(conf).takeError();
  auto timeout = rdzvTimeout(o, *conf);
  if (!timeout) return std::move(timeout).takeError();
  plan.rdzv_timeout = *timeout;
  plan.store_host_configured = conf->is_host;
  if (plan.num_machines == 1 && (!o.rdzv_conf.empty() || o.rdzv_timeout_s ||
                                 plan.config.sources["rdzv_backend"] == config::Source::Flag)) {
    plan.notices.push_back(
        "--rdzv_backend/--rdzv_conf/--rdzv_timeout have no effect on a single machine");
  }
  const std::string& backend = plan.config.config.rdzv_backend;
  if (plan.num_machines > 1 && (backend == "etcd" || backend == "etcd-v2")) {
    plan.notices.push_back("rdzv_backend " + backend +
                           ": accel has no etcd rendezvous; the machines meet at machine 0's "
                           "store (" +
                           plan.master_addr + ":" + std::to_string(plan.master_port.value_or(0)) +
                           "), as with static");
  }
  return {};
}

// The config file (accel launch) or torchrun's defaults (accel run), under the flags.
// A count per machine (--nproc_per_node) stands for the total it makes with the machines given.
Expected<config::EffectiveConfig> effectiveConfig(const LaunchOptions& o,
                                                  const config::PathEnv& paths,
                                                  std::optional<int> perMachine) {
  config::ConfigOverrides flags = o.config;
  if (perMachine && !flags.num_processes)
    flags.num_processes = *perMachine * flags.num_machines.value_or(1);
  if (o.mode == LaunchMode::Torchrun) {
    config::EffectiveConfig base;
    base.config = config::builtinDefaults();
    return config::applyOverrides(std::move(base), flags);
  }
  return config::resolveEffectiveConfig(flags, paths);
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
  if (o.mode == LaunchMode::Torchrun && plan.num_machines > 1 && !plan.master_port)
    plan.master_port = kDefaultMasterPort;
  if (auto ok = checkMultiMachine(plan, o); !ok) return std::move(ok).takeError();
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
  auto argv = resolveCommand(o, env);
  if (!argv) return std::move(argv).takeError();
  plan.argv = std::move(*argv);
  if (auto ok = applyAgentFlags(plan, o); !ok) return std::move(ok).takeError();
  chooseRunId(plan, o);
  if (auto ok = setCommonEnv(plan, o, env, *devices); !ok) return std::move(ok).takeError();
  chooseOmpThreads(plan, o, env, scheduler);
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
