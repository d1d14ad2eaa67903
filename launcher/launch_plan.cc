#include "launcher/launch_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <random>

#include "config/schema.h"
#include "launcher/subprocess_posix.h"
#include "launcher/worker_env.h"
#include "libaccel/common/env_names.h"
#include "libaccel/store/tcp_store_server.h"
#include "probes/scheduler_env.h"

namespace accel::launcher {

// The vocabulary of the machine's environment comes from probes/.
using probes::findInPath;
using probes::SchedulerInfo;
using probes::detectScheduler;
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string absolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

std::string pythonBool(bool b) { return b ? "True" : "False"; }

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
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
Expected<std::vector<std::string>> resolveCommand(const LaunchOptions& o, const Environment& env) {
  if (o.command.empty()) return makeError("no training script given: accel launch [flags] SCRIPT [args...]");
  const std::string& target = o.command[0];
  std::vector<std::string> argv;
  auto pythonCommand = [&]() -> Expected<std::string> {
    std::string python = o.python ? *o.python : lookup(env, "PYTHON_EXEC").value_or("python3");
    std::string path = findInPath(python);
    if (path.empty()) {
      return makeError("python interpreter '" + python + "' not found in PATH (set --python or PYTHON_EXEC)");
    }
    return path;
  };

  if (o.module) {
    if (o.no_python) return makeError("-m/--module and --no_python cannot be used together");
    auto python = pythonCommand();
    if (!python) return std::move(python).takeError();
    argv = {*python, "-u", "-m"};
  } else if (!o.no_python && endsWith(target, ".py")) {
    struct stat st {};
    if (::stat(target.c_str(), &st) != 0) return makeError("training script '" + target + "' not found");
    if (S_ISDIR(st.st_mode)) return makeError("training script '" + target + "' is a directory");
    if (::access(target.c_str(), R_OK) != 0) return makeError("training script '" + target + "' is not readable");
    auto python = pythonCommand();
    if (!python) return std::move(python).takeError();
    argv = {*python, "-u", absolutePath(target)};
    argv.insert(argv.end(), o.command.begin() + 1, o.command.end());
    return argv;
  } else {
    std::string path = findInPath(target);
    if (path.empty()) {
      struct stat st {};
      bool exists = target.find('/') != std::string::npos ? ::stat(target.c_str(), &st) == 0 : false;
      if (exists && !S_ISDIR(st.st_mode)) {
        return makeError("training script '" + target + "' is not executable (chmod +x it, or give a .py file)");
      }
      return makeError("training script '" + target + "' not found" +
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
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty() || !std::all_of(item.begin(), item.end(), ::isdigit) || item.size() > 6 ||
        std::stoi(item) >= localWorldSize) {
      return makeError("--local_ranks_filter: '" + item + "' is not a local rank (0.." +
                       std::to_string(localWorldSize - 1) + ")");
    }
    ranks.insert(std::stoi(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ranks;
}

// --rdzv_timeout, else timeout= in --rdzv_conf (torchrun's spelling), else 900 s.
Expected<std::chrono::milliseconds> rdzvTimeout(const LaunchOptions& o) {
  double seconds = 900;
  if (o.rdzv_timeout_s) {
    seconds = *o.rdzv_timeout_s;
  } else {
    size_t start = 0;
    while (start < o.rdzv_conf.size()) {
      size_t comma = o.rdzv_conf.find(',', start);
      std::string item = o.rdzv_conf.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.rfind("timeout=", 0) == 0) {
        char* end = nullptr;
        seconds = std::strtod(item.c_str() + 8, &end);
        if (*end != '\0') return makeError("--rdzv_conf: '" + item + "' is not timeout=SECONDS");
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (!(seconds > 0)) return makeError("--rdzv_timeout: must be more than 0 seconds");
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

int countGpuIds(const std::string& ids) { return static_cast<int>(std::count(ids.begin(), ids.end(), ',')) + 1; }

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
    return makeError("--no_spawn makes each srun task one rank, but this is SLURM's batch script itself (no "
                     "SLURM_STEP_ID): run `srun accel launch --no_spawn ...`");
  }
  if (givenAsFlag(plan, "num_processes") && c.num_processes != s.num_tasks) {
    return makeError("--num_processes " + std::to_string(c.num_processes) + " disagrees with " + s.name + ", which started " +
                     std::to_string(s.num_tasks) + " tasks, each one rank (" + s.source + ")");
  }
  for (const char* key : {"num_machines", "machine_rank"}) {
    if (givenAsFlag(plan, key)) plan.notices.push_back(std::string("--") + key + " is ignored: " + s.name + " places the ranks");
  }
  plan.exec_in_place = true;
  plan.agent_store = false;
  plan.world_size = s.num_tasks;
  plan.local_world_size = s.local_num_tasks;
  plan.num_machines = s.num_nodes;
  plan.node_rank = s.node_rank;
  plan.exec_local_rank = s.local_task_rank;
  plan.rank_offset = s.task_rank - s.local_task_rank;  // so that globalRank(exec_local_rank) is the task's rank
  if (c.main_process_ip && givenAsFlag(plan, "main_process_ip")) {
    plan.master_addr = *c.main_process_ip;
  } else if (!s.hosts.empty()) {
    plan.master_addr = s.hosts.front();
    plan.master_addr_from_scheduler = true;
  } else if (s.num_nodes > 1) {
    return makeError("--main_process_ip: required under " + s.name + " across " + std::to_string(s.num_nodes) +
                     " nodes (the address of the node that runs rank 0; " + s.name + " does not say)");
  } else {
    plan.master_addr = "127.0.0.1";
  }
  plan.master_port = givenAtAll(plan, "main_process_port") && c.main_process_port && *c.main_process_port != 0
                         ? *c.main_process_port
                         : portForJob(s.job_id);
  return {};
}

// Where this agent's machine stands in the job: flags, else the scheduler, else the file.
Expected<void> placeMachines(LaunchPlan& plan, const LaunchOptions& o, const std::optional<SchedulerInfo>& scheduler,
                             int usableGpus) {
  const config::ClusterConfig& c = plan.config.config;
  plan.num_machines = c.num_machines;
  plan.node_rank = c.machine_rank;
  plan.world_size = c.num_processes;
  if (c.main_process_ip) plan.master_addr = *c.main_process_ip;
  if (c.main_process_port && *c.main_process_port != 0) plan.master_port = *c.main_process_port;
  if (o.no_spawn && !scheduler) {
    return makeError("--no_spawn: each task's rank comes from its scheduler, but no SLURM step (SLURM_PROCID) or MPI "
                     "launch (OMPI_COMM_WORLD_RANK, PMI_RANK) is visible here");
  }
  if (scheduler) {
    const SchedulerInfo& s = *scheduler;
    plan.scheduler = s.name;
    if (s.job_id) plan.run_id = *s.job_id;
    if (o.no_spawn || s.name != "SLURM") return placeTask(plan, s);
    // SLURM, an agent per node.
    if (!s.in_step && s.num_nodes > 1) {
      return makeError("this SLURM job has " + std::to_string(s.num_nodes) + " nodes but accel launch runs in the batch "
                       "script, on the first one only: start an agent on every node with `srun --ntasks-per-node=1 "
                       "accel launch ...`");
    }
    if (s.in_step && s.num_tasks != s.num_nodes) {
      return makeError("srun started " + std::to_string(s.num_tasks) + " tasks on " + std::to_string(s.num_nodes) +
                       " node(s) (" + s.source + "): use --ntasks-per-node=1 for one agent per node, or "
                       "accel launch --no_spawn to make each task one rank");
    }
    if (!givenAsFlag(plan, "num_machines")) plan.num_machines = s.num_nodes;
    if (!givenAsFlag(plan, "machine_rank")) plan.node_rank = s.node_rank;
    if (plan.node_rank >= plan.num_machines) {
      return makeError("machine_rank " + std::to_string(plan.node_rank) + " must be below num_machines " +
                       std::to_string(plan.num_machines));
    }
    if (plan.num_machines > 1 && !givenAsFlag(plan, "main_process_ip")) {
      plan.master_addr = s.hosts.front();
      plan.master_addr_from_scheduler = true;
    }
    if (plan.num_machines > 1 && !givenAtAll(plan, "main_process_port")) plan.master_port = portForJob(s.job_id);
    if (!givenAtAll(plan, "num_processes")) {
      // One process per GPU SLURM gave this node (when the job uses GPUs), else one per node.
      const int perNode = usableGpus > 0 && s.gpus_on_node && *s.gpus_on_node > 0 ? *s.gpus_on_node : 1;
      plan.world_size = perNode * plan.num_machines;
    }
  }
  if (plan.world_size % plan.num_machines != 0) {
    return makeError("num_processes " + std::to_string(plan.world_size) + " is not a multiple of num_machines " +
                     std::to_string(plan.num_machines));
  }
  plan.local_world_size = plan.world_size / plan.num_machines;
  plan.rank_offset = plan.node_rank * plan.local_world_size;
  return {};
}

// The GPU facts the plan depends on, known once the config is resolved.
struct Devices {
  bool gpu = false;     // a multi-GPU job
  int usable_gpus = 0;  // counted only when GPUs matter (multi-GPU or fp16)
};

// Precision and distributed type accel can run, given the GPUs this machine has.
Expected<Devices> checkDevices(const config::ClusterConfig& c, const std::function<int()>& countGpus) {
  if (c.mixed_precision == "fp8") return makeError("mixed_precision fp8 is not supported by accel");
  Devices d;
  d.gpu = c.distributed_type == config::kDistributedMultiGpu;
  d.usable_gpus = d.gpu || c.mixed_precision == "fp16" ? countGpus() : 0;
  if (c.mixed_precision == "fp16" && (c.use_cpu || d.usable_gpus == 0)) {
    return makeError("mixed_precision fp16 needs a GPU" +
                     std::string(c.use_cpu ? " but the job is CPU-only (--cpu / use_cpu)" : " and none is usable here") +
                     "; use bf16 or no");
  }
  if (c.distributed_type != config::kDistributedNo && c.distributed_type != config::kDistributedMultiCpu && !d.gpu) {
    return makeError("distributed_type " + c.distributed_type + " is not supported by accel (NO, MULTI_CPU, MULTI_GPU)");
  }
  return d;
}

// Agents of several machines meet at one address and port, and cannot restart together yet.
Expected<void> checkMultiMachine(const LaunchPlan& plan, const LaunchOptions& o) {
  if (plan.num_machines <= 1 || plan.exec_in_place) return {};
  if (!plan.config.config.main_process_ip && !plan.master_addr_from_scheduler) {
    return makeError("--main_process_ip: required with --num_machines " + std::to_string(plan.num_machines) +
                     " (the address of machine_rank 0, which hosts the job's store)");
  }
  if (!plan.master_port) {
    return makeError("--main_process_port: required with --num_machines " + std::to_string(plan.num_machines) +
                     " (every machine must use the same port)");
  }
  if (o.max_restarts > 0) return makeError("--max_restarts: restarts of multi-machine jobs are not supported yet");
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
                                     : "distributed_type MULTI_GPU in " + plan.config.file.value_or("the config")) +
                     ") but no GPU is usable on this machine; use --cpu");
  }
  if (plan.local_world_size > available) {
    return makeError("num_processes " + std::to_string(plan.local_world_size) + " on this machine is more than the " +
                     std::to_string(available) + " GPU(s) available" +
                     (c.gpu_ids && *c.gpu_ids != "all" ? " in gpu_ids " + *c.gpu_ids : "") +
                     "; lower --num_processes or use --cpu");
  }
  return {};
}

// The flags that only the agent reads: console output and limits.
// "128M", "1G", "65536": a size in bytes (K, M, G are powers of 1024; "KiB"/"MB" spellings too).
Expected<uint64_t> parseByteSize(const std::string& flag, const std::string& text) {
  size_t end = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
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
    return makeError("--store_input_budget: " + std::to_string(plan.store_input_budget_bytes) +
                     " bytes is less than one connection may hold (--store_connection_input_limit " +
                     std::to_string(plan.store_connection_input_bytes) + ")");
  }
  return {};
}

Expected<void> applyAgentFlags(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.tee && (*o.tee < 0 || *o.tee > 3)) return makeError("--tee: " + std::to_string(*o.tee) + " is not 0, 1, 2 or 3");
  plan.tee = o.tee.value_or(3);
  if (o.local_ranks_filter) {
    auto ranks = parseRankFilter(*o.local_ranks_filter, plan.local_world_size);
    if (!ranks) return std::move(ranks).takeError();
    plan.console_ranks = std::move(*ranks);
  }
  if (o.max_restarts < 0) return makeError("--max_restarts: must be 0 or more");
  if (o.num_cpu_threads_per_process && *o.num_cpu_threads_per_process < 1) {
    return makeError("--num_cpu_threads_per_process: must be at least 1");
  }
  if (o.gradient_accumulation_steps && *o.gradient_accumulation_steps < 1) {
    return makeError("--gradient_accumulation_steps: must be at least 1");
  }
  if (o.term_timeout.count() < 0) return makeError("--term_timeout: must be 0 or more");
  plan.max_restarts = o.max_restarts;
  plan.role = o.role;
  plan.log_dir = o.log_dir;
  // A rank per task: only rank 0 speaks for the job (hundreds of tasks must not repeat it).
  plan.quiet = o.quiet || (plan.exec_in_place && globalRank(plan, plan.exec_local_rank) != 0);
  plan.dry_run = o.dry_run;
  plan.term_timeout = o.term_timeout;
  return applyStoreLimits(plan, o);
}

// Every machine of a job must agree on the run id without talking: the scheduler's job id, or
// one derived from the shared store address.
void chooseRunId(LaunchPlan& plan) {
  if (!plan.run_id.empty()) return;
  plan.run_id = plan.num_machines > 1 ? "accel-" + plan.master_addr + "-" + std::to_string(plan.master_port.value_or(0))
                                      : newRunId();
}

// accelerate's ACCELERATE_DYNAMO_* variables from the config's dynamo_config section.
void setDynamoEnv(std::map<std::string, std::string>& e, const config::ClusterConfig& c) {
  const auto dynamoIt = c.extras.find("dynamo_config");
  const nlohmann::json dynamo = dynamoIt != c.extras.end() ? dynamoIt->second : nlohmann::json::object();
  auto dynamoValue = [&dynamo](const char* key, const nlohmann::json& fallback) {
    return dynamo.contains(key) ? dynamo.at(key) : fallback;
  };
  nlohmann::json backend = dynamoValue("dynamo_backend", "NO");
  e[env::kDynamoBackend] = upper(backend.is_string() ? backend.get<std::string>() : "NO");
  nlohmann::json mode = dynamoValue("dynamo_mode", "default");
  e[env::kDynamoMode] = mode.is_string() ? mode.get<std::string>() : "default";
  e[env::kDynamoUseFullgraph] = pythonBool(dynamoValue("dynamo_use_fullgraph", false) == true);
  e[env::kDynamoUseDynamic] = pythonBool(dynamoValue("dynamo_use_dynamic", false) == true);
  e[env::kDynamoUseRegionalCompilation] = pythonBool(dynamoValue("dynamo_use_regional_compilation", false) == true);
}

// accelerate's variables for the same settings, and NCCL's async error handling.
void setCommonEnv(LaunchPlan& plan, const LaunchOptions& o, const Environment& env, bool gpu) {
  const config::ClusterConfig& c = plan.config.config;
  auto& e = plan.common_env;
  e[env::kMixedPrecision] = c.mixed_precision;
  e[env::kUseCpu] = pythonBool(c.use_cpu);
  if (c.debug) e[env::kDebugMode] = "true";
  if (c.enable_cpu_affinity) e[env::kCpuAffinity] = "1";
  if (o.gradient_accumulation_steps) e[env::kGradientAccumulationSteps] = std::to_string(*o.gradient_accumulation_steps);
  if (gpu && c.gpu_ids && *c.gpu_ids != "all") {
    std::string ids = *c.gpu_ids;
    ids.erase(std::remove(ids.begin(), ids.end(), ' '), ids.end());
    e[env::kCudaVisibleDevices] = ids;
  }
  if (!gpu) {
    e[env::kKmpAffinity] = "granularity=fine,compact,1,0";
    e[env::kKmpBlocktime] = "1";
  }
  setDynamoEnv(e, c);
  for (const char* key : {env::kTorchNcclAsyncErrorHandling, env::kNcclAsyncErrorHandling}) {
    if (!lookup(env, key)) e[key] = "1";
  }
}

// OMP_NUM_THREADS for the workers: the flag, else (pinned ranks) each rank's cores, chosen with
// the sets (assignCpuAffinity), else the scheduler's CPUs shared out, else 1 when several
// processes would otherwise each take every core.
void chooseOmpThreads(LaunchPlan& plan, const LaunchOptions& o, const Environment& env,
                      const std::optional<SchedulerInfo>& scheduler) {
  if (o.num_cpu_threads_per_process) {
    plan.omp_num_threads = *o.num_cpu_threads_per_process;
  } else if (!lookup(env, env::kOmpNumThreads) && plan.config.config.enable_cpu_affinity && !plan.exec_in_place) {
    plan.omp_from_affinity = true;
  } else if (!lookup(env, env::kOmpNumThreads) && scheduler && scheduler->cpus_on_node) {
    plan.omp_num_threads = std::max(1, *scheduler->cpus_on_node / plan.local_world_size);
    plan.notices.push_back(std::string(env::kOmpNumThreads) + "=" + std::to_string(*plan.omp_num_threads) +
                           " for each of the " + std::to_string(plan.local_world_size) + " processes on this node (" +
                           scheduler->name + " gives it " + std::to_string(*scheduler->cpus_on_node) + " CPUs)");
  } else if (!lookup(env, env::kOmpNumThreads) && plan.local_world_size > 1) {
    plan.omp_num_threads = 1;
    plan.omp_notice = true;
  }
}

// How long agents wait for each other, and notices for torchrun flags that do nothing here.
Expected<void> applyRendezvousFlags(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.monitor_interval != 0.1) {
    plan.notices.push_back("--monitor_interval is ignored: accel reacts to worker exits as they happen");
  }
  auto timeout = rdzvTimeout(o);
  if (!timeout) return std::move(timeout).takeError();
  plan.rdzv_timeout = *timeout;
  if (plan.num_machines == 1 && (!o.rdzv_conf.empty() || o.rdzv_timeout_s ||
                                 plan.config.sources["rdzv_backend"] == config::Source::Flag)) {
    plan.notices.push_back("--rdzv_backend/--rdzv_conf/--rdzv_timeout have no effect on a single machine");
  }
  return {};
}

}  // namespace

int portForJob(const std::optional<std::string>& jobId) {
  if (!jobId || jobId->empty() || jobId->size() > 18 ||
      jobId->find_first_not_of("0123456789") != std::string::npos) {
    return 29500;
  }
  return 20000 + static_cast<int>(std::stoll(*jobId) % 10000);
}

Expected<LaunchPlan> makeLaunchPlan(const LaunchOptions& o, const config::PathEnv& paths, const Environment& env,
                                    const std::function<int()>& countGpus) {
  auto effective = config::resolveEffectiveConfig(o.config, paths);
  if (!effective) return std::move(effective).takeError();
  LaunchPlan plan;
  plan.config = std::move(*effective);
  auto devices = checkDevices(plan.config.config, countGpus);
  if (!devices) return std::move(devices).takeError();
  auto scheduler = detectScheduler(env);
  if (!scheduler) return makeError("cannot use the scheduler's environment: " + scheduler.error());
  if (auto ok = placeMachines(plan, o, *scheduler, devices->gpu ? devices->usable_gpus : 0); !ok) return std::move(ok).takeError();
  if (auto ok = checkMultiMachine(plan, o); !ok) return std::move(ok).takeError();
  if (auto ok = checkGpuCount(plan, *devices); !ok) return std::move(ok).takeError();
  auto argv = resolveCommand(o, env);
  if (!argv) return std::move(argv).takeError();
  plan.argv = std::move(*argv);
  if (auto ok = applyAgentFlags(plan, o); !ok) return std::move(ok).takeError();
  chooseRunId(plan);
  setCommonEnv(plan, o, env, devices->gpu);
  chooseOmpThreads(plan, o, env, *scheduler);
  if (auto ok = applyRendezvousFlags(plan, o); !ok) return std::move(ok).takeError();
  return plan;
}

}  // namespace accel::launcher
