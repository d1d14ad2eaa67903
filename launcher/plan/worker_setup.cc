// What every worker runs and inherits (plan_steps.h): the command, accelerate's environment,
// mpirun for accelerate's MPI CPU jobs, OMP_NUM_THREADS.

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
#include "launcher/plan/plan_steps.h"
#include "launcher/plan/stream_masks.h"
#include "launcher/plan/worker_env.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/common/env_names.h"
#include "probes/run_program.h"
#include "probes/scheduler_env.h"
#include "probes/system_info.h"

namespace accel::launcher::detail {

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

// The interpreter for .py scripts and -m: --python, the config's accel_python, $PYTHON_EXEC, else
// python3 (`byDefault`: nobody chose; planLaunch may take another that has torch).
Expected<std::string> pythonCommand(const LaunchOptions& o, const config::Document& extras,
                                    const probes::Environment& env, bool& byDefault) {
  std::string python;
  std::string source = "--python";
  if (o.python) {
    python = *o.python;
  } else if (auto it = extras.find("accel_python"); it != extras.end() && it->second.is_string()) {
    python = it->second.get<std::string>();
    source = "the config's accel_python";
  } else if (auto exec = probes::lookup(env, "PYTHON_EXEC")) {
    python = *exec;
    source = "PYTHON_EXEC";
  } else {
    python = "python3";
    byDefault = true;
  }
  std::string path = findInPath(python);
  if (path.empty()) {
    return makeError("python interpreter '" + python + "' not found" +
                     (python.find('/') == std::string::npos ? " in PATH" : "") +
                     (byDefault ? " (set --python, accel_python in the config, or PYTHON_EXEC)"
                                : " (from " + source + ")"));
  }
  return path;
}

}  // namespace

// The argv every rank runs, with argv[0] resolved to a path.
Expected<std::vector<std::string>> resolveCommand(LaunchPlan& plan, const LaunchOptions& o,
                                                  const probes::Environment& env) {
  if (o.command.empty())
    return makeError("no training script given: accel launch [flags] SCRIPT [args...]");
  const std::string& target = o.command[0];
  std::vector<std::string> argv;
  auto python = [&]() {
    return pythonCommand(o, plan.config.config.extras, env, plan.python_by_default);
  };

  if (o.module) {
    if (o.no_python) return makeError("-m/--module and --no_python cannot be used together");
    auto interpreter = python();
    if (!interpreter) return std::move(interpreter).takeError();
    argv = {*interpreter, "-u", "-m"};
  } else if (o.run_path || (!o.no_python && endsWith(target, ".py"))) {
    struct stat st {};
    if (::stat(target.c_str(), &st) != 0)
      return makeError("training script '" + target + "' not found");
    if (S_ISDIR(st.st_mode)) return makeError("training script '" + target + "' is a directory");
    if (::access(target.c_str(), R_OK) != 0)
      return makeError("training script '" + target + "' is not readable");
    auto interpreter = python();
    if (!interpreter) return std::move(interpreter).takeError();
    argv = {*interpreter, "-u", absolutePath(target)};
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
      // As a shell does, a name without a slash is looked up in PATH only: a file of that name
      // here is the likely intent.
      if (target.find('/') == std::string::npos && ::stat(target.c_str(), &st) == 0 &&
          !S_ISDIR(st.st_mode)) {
        const bool executable = ::access(target.c_str(), X_OK) == 0;
        return makeError("training script '" + target +
                         "' is not in PATH; for the file in the current directory, run './" +
                         target + "'" + (executable ? "" : " (after chmod +x " + target + ")"));
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
  std::vector<std::string> cmd = {app,
                                  openMpi ? "--hostfile" : "-f",
                                  hostfile->second.get<std::string>(),
                                  openMpi ? "--npernode" : "-ppn",
                                  std::to_string(plan.local_world_size),
                                  "-n",
                                  std::to_string(plan.world_size)};
  if (openMpi) cmd.insert(cmd.end(), {"--bind-to", "socket"});
  // Each line tagged with its MPI rank, which the console shows as "[rank R] " (mpi_tagged_output).
  cmd.push_back(openMpi ? "--tag-output" : "-prepend-rank");
  plan.mpi_tagged_output = true;
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

Expected<void> assignVirtualDevices(LaunchPlan& plan, const LaunchOptions& o,
                                    const probes::Environment& env) {
  plan.virtual_local_rank = o.virtual_local_rank;
  if (!plan.virtual_local_rank) return {};
  std::optional<std::string> visible;
  if (auto it = plan.common_env.find(env::kCudaVisibleDevices); it != plan.common_env.end()) {
    visible = it->second;
  } else {
    visible = probes::lookup(env, env::kCudaVisibleDevices);
  }
  std::vector<std::string> devices;
  if (visible) {
    // torch: available_gpus[local_rank].strip()
    for (std::string_view item : splitOn(*visible, ',')) devices.emplace_back(trimmed(item));
  }
  for (int lr = 0; lr < plan.local_world_size; ++lr) {
    if (!visible) {
      plan.virtual_devices.push_back(std::to_string(lr));
    } else if (static_cast<size_t>(lr) < devices.size()) {
      plan.virtual_devices.push_back(devices[static_cast<size_t>(lr)]);
    } else {
      return makeError("--virtual_local_rank: local rank " + std::to_string(lr) +
                       " has no GPU of its own in CUDA_VISIBLE_DEVICES=" + *visible + " (" +
                       std::to_string(devices.size()) + " for " +
                       std::to_string(plan.local_world_size) + " processes)");
    }
  }
  return {};
}

}  // namespace accel::launcher::detail
