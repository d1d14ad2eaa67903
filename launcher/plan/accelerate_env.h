#pragma once
// The worker environment accelerate's launcher builds, computed the way accelerate computes it:
// its `_validate_launch_command` (the config file's sections copied onto the flags a user did not
// give) and its `prepare_simple_launcher_cmd_env`, `prepare_multi_gpu_env` and
// `prepare_deepspeed_cmd_env` (ACCELERATE_*, FSDP_*, MEGATRON_LM_*, PARALLELISM_CONFIG_*, fp8,
// dynamo, OMP_NUM_THREADS, KMP_*, CUDA_VISIBLE_DEVICES). Values are Python's str() of the same
// values accelerate holds, so a worker cannot tell the two launchers apart. Pure functions:
// tests/launcher/plan/accelerate_env_test.cc checks them and tests/e2e/accelerate_parity.py checks
// the whole launch against environments recorded from accelerate's own code.

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "launcher/plan/launch_options.h"
#include "probes/environment.h"

namespace accel::launcher {

// The launcher accelerate's `launch_command` would choose; the environment depends on it.
enum class AccelerateLauncher {
  Simple,     // NO, MULTI_CPU, anything with --cpu: prepare_simple_launcher_cmd_env
  MultiGpu,   // MULTI_GPU, FSDP, MEGATRON_LM: prepare_multi_gpu_env, then torchrun
  DeepSpeed,  // DEEPSPEED: prepare_deepspeed_cmd_env, then torchrun
};

// accelerate's argument namespace after `_validate_launch_command`: every flag's value, and for
// each key of the config's mapping sections (fsdp_config, deepspeed_config, megatron_lm_config,
// fp8_config, dynamo_config, mpirun_config, parallelism_config) the file's value where the flag
// was not given (fsdp_/fp8_/dynamo_ prefixes added as accelerate adds them).
using AccelerateArgs = std::map<std::string, nlohmann::json>;
AccelerateArgs accelerateArgs(const AccelerateNamespace& flags,
                              const config::ClusterConfig& config);

// What the launch plan decided that accelerate's environment depends on.
struct AccelerateFacts {
  AccelerateLauncher launcher = AccelerateLauncher::Simple;
  bool use_cpu = false;  // --cpu or use_cpu
  bool debug = false;
  bool enable_cpu_affinity = false;  // flag or key
  std::string mixed_precision = "no";
  bool mixed_precision_from_config =
      false;  // accelerate's mp_from_config_flag (DeepSpeed's field list)
  std::optional<std::string> gpu_ids;
  int num_processes = 1;  // over all machines
  int num_machines = 1;
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  std::string cwd;         // DeepSpeed adds it to PYTHONPATH
  int physical_cores = 0;  // psutil.cpu_count(logical=False): CPU jobs' OMP_NUM_THREADS
  std::vector<std::string>
      deepspeed_config_keys;  // the config's deepspeed_config keys, in file order
};

// The variables accelerate sets for every worker (not the per-rank torchrun ones). `parent` is
// the launcher's own environment (OMP_NUM_THREADS, MPI local sizes and PYTHONPATH are read from
// it). Errors are accelerate's own checks ("--fsdp_cpu_ram_efficient_loading needs
// --fsdp_sync_module_states") naming the flag.
Expected<std::map<std::string, std::string>> accelerateEnvironment(
    const AccelerateArgs& args, const AccelerateFacts& facts, const probes::Environment& parent);

}  // namespace accel::launcher
