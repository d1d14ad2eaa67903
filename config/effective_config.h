#pragma once
// The effective configuration of a command: command-line flag > config file > built-in default,
// with the source of every value recorded so `accel config show` can explain it.

#include <map>
#include <optional>
#include <string>

#include "config/cluster_config.h"
#include "config/paths.h"
#include "libaccel/common/expected.h"

namespace accel::config {

enum class Source { Default, File, Flag };
const char* sourceName(Source source);  // "default", "file", "flag"

// Values given as command-line flags; nullopt = the flag was not given. Shared by
// `accel config show` and `accel launch`, which spell the flags the same way.
struct ConfigOverrides {
  std::optional<std::string> config_file;
  bool cpu = false;        // --cpu: use_cpu, and MULTI_GPU becomes MULTI_CPU
  bool multi_gpu = false;  // --multi_gpu: distributed_type MULTI_GPU
  // --use_deepspeed / --use_fsdp / --use_megatron_lm: DEEPSPEED, FSDP or MEGATRON_LM
  std::optional<std::string> distributed_type;
  bool enable_cpu_affinity =
      false;  // --enable_cpu_affinity only turns pinning on, as in accelerate
  std::optional<int> num_processes;
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  std::optional<std::string> mixed_precision;
  std::optional<std::string> gpu_ids;
  std::optional<std::string> rdzv_backend;
  std::optional<bool> same_network;
  bool debug = false;  // --debug only turns debugging on, as in accelerate
};

struct EffectiveConfig {
  ClusterConfig config;
  std::optional<std::string> file;        // the config file read, if any
  std::map<std::string, Source> sources;  // for every key of config.toDocument()
};

// Where `key`'s value came from, for messages: `flag` (as the user spelled it), "'key' in FILE",
// or "the default".
std::string origin(const EffectiveConfig& e, const char* key, const char* flag);

// Built-in defaults: a single process on this machine, no mixed precision.
ClusterConfig builtinDefaults();

// Applies `flags` on top of `base` (whose sources are already recorded). Errors name the flag
// ("--mixed_precision: 'fp32' is not one of no, fp16, bf16") or, for a conflict with the file,
// both sides.
Expected<EffectiveConfig> applyOverrides(EffectiveConfig base, const ConfigOverrides& flags);

// Loads the file chosen by resolveConfigPath (if any) over the built-in defaults, then applies
// the flags.
Expected<EffectiveConfig> resolveEffectiveConfig(const ConfigOverrides& flags, const PathEnv& env);

}  // namespace accel::config
