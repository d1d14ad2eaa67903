#include "launcher/plan/accelerate_env.h"

#include <algorithm>

#include "launcher/base/defaults.h"
#include "launcher/base/text.h"
#include "launcher/plan/python_str.h"

namespace accel::launcher {
namespace {

using nlohmann::json;
using Env = std::map<std::string, std::string>;

// Python's truth value of a namespace entry ("false" is a non-empty string, so true).
bool truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

// Callers that keep the value copy it: g++ 14's -Wdangling-reference (the CUDA build,
// scripts/cuda_build.sh) cannot tell that the result does not refer to the key's temporary.
const json& arg(const AccelerateArgs& args, const std::string& key) {
  static const json none;
  auto it = args.find(key);
  return it == args.end() ? none : it->second;
}

// The key a section's entry takes in the namespace, as `_validate_launch_command` names it.
std::string namespaceKey(const std::string& section, const std::string& key) {
  if (section == "fsdp_config" && key.rfind("fsdp", 0) != 0) return "fsdp_" + key;
  if (section == "fp8_config" && key.rfind("fp8", 0) != 0) return "fp8_" + key;
  if (section == "dynamo_config" && key.rfind("dynamo_", 0) != 0) return "dynamo_" + key;
  return key;
}

// accelerate's get_int_from_env: the first of `keys` holding a non-negative integer.
int intFromEnv(const probes::Environment& env, std::initializer_list<const char*> keys,
               int fallback) {
  for (const char* key : keys) {
    auto value = probes::lookup(env, key);
    if (!value) continue;
    try {
      size_t used = 0;
      const int v = std::stoi(*value, &used);
      if (used == value->size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

// OMP_NUM_THREADS as `_validate_launch_command` chooses num_cpu_threads_per_process.
std::string ompThreads(const AccelerateArgs& args, const AccelerateFacts& f,
                       const probes::Environment& parent) {
  const json flag = arg(args, "num_cpu_threads_per_process");
  if (!flag.is_null()) return pythonStr(flag);
  int threads = intFromEnv(parent, {"OMP_NUM_THREADS"}, 1);
  if (f.use_cpu && f.num_processes >= 1 && intFromEnv(parent, {"OMP_NUM_THREADS"}, 0) == 0) {
    const int local = intFromEnv(
        parent, {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"},
        std::max(f.num_processes / std::max(f.num_machines, 1), 1));
    const int perProcess = local > 0 ? f.physical_cores / local : 0;
    if (perProcess > 1) threads = perProcess;
  }
  return std::to_string(threads);
}

// setup_fp8_env: every fp8_* entry that is not None, as ACCELERATE_FP8_*.
void fp8Env(const AccelerateArgs& args, Env& e) {
  for (const auto& [key, value] : args) {
    if (key.rfind("fp8_", 0) != 0 || value.is_null()) continue;
    if (key == "fp8_override_linear_precision" && value.is_array() && value.size() >= 3) {
      e["ACCELERATE_FP8_OVERRIDE_FPROP"] = pythonStr(value[0]);
      e["ACCELERATE_FP8_OVERRIDE_DGRAD"] = pythonStr(value[1]);
      e["ACCELERATE_FP8_OVERRIDE_WGRAD"] = pythonStr(value[2]);
    } else {
      e["ACCELERATE_" + upperCase(key)] = pythonStr(value);
    }
  }
}

void dynamoEnv(const AccelerateArgs& args, Env& e) {
  const json backend = arg(args, "dynamo_backend");
  e["ACCELERATE_DYNAMO_BACKEND"] = upperCase(backend.is_null() ? "no" : pythonStr(backend));
  e["ACCELERATE_DYNAMO_MODE"] = pythonStr(arg(args, "dynamo_mode"));
  e["ACCELERATE_DYNAMO_USE_FULLGRAPH"] = pythonStr(arg(args, "dynamo_use_fullgraph"));
  e["ACCELERATE_DYNAMO_USE_DYNAMIC"] = pythonStr(arg(args, "dynamo_use_dynamic"));
  e["ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION"] =
      pythonStr(arg(args, "dynamo_use_regional_compilation"));
}

// What every launcher sets: debug mode, visible GPUs, precision (and fp8's settings).
void deviceAndPrecisionEnv(const AccelerateArgs& args, const AccelerateFacts& f, Env& e) {
  if (f.debug) e["ACCELERATE_DEBUG_MODE"] = "true";
  if (f.gpu_ids && *f.gpu_ids != "all") {
    // accelerate passes "0, 1" on as it is; CUDA stops reading at the space, so accel drops spaces.
    std::string ids = *f.gpu_ids;
    ids.erase(std::remove(ids.begin(), ids.end(), ' '), ids.end());
    e["CUDA_VISIBLE_DEVICES"] = ids;
  }
  e["ACCELERATE_MIXED_PRECISION"] = lowerCase(f.mixed_precision);
  if (lowerCase(f.mixed_precision) == "fp8") fp8Env(args, e);
}

Expected<void> fsdpEnv(const AccelerateArgs& args, Env& e) {
  auto s = [&](const char* key) { return pythonStr(arg(args, key)); };
  auto low = [&](const char* key) { return lowerCase(pythonStr(arg(args, key))); };
  e["ACCELERATE_USE_FSDP"] = "true";
  if (truthy(arg(args, "fsdp_cpu_ram_efficient_loading")) &&
      !truthy(arg(args, "fsdp_sync_module_states"))) {
    return makeError(
        "When using `--fsdp_cpu_ram_efficient_loading` set `--fsdp_sync_module_states` to `True` "
        "(accelerate's rule; the config's fsdp_config says otherwise)");
  }
  e["FSDP_VERSION"] = s("fsdp_version");
  e["FSDP_SHARDING_STRATEGY"] = s("fsdp_sharding_strategy");
  e["FSDP_RESHARD_AFTER_FORWARD"] = low("fsdp_reshard_after_forward");
  e["FSDP_OFFLOAD_PARAMS"] = low("fsdp_offload_params");
  e["FSDP_MIN_NUM_PARAMS"] = s("fsdp_min_num_params");
  const std::pair<const char*, const char*> optional[] = {
      {"fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"},
      {"fsdp_transformer_layer_cls_to_wrap", "FSDP_TRANSFORMER_CLS_TO_WRAP"},
      {"fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"},
      {"fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"}};
  for (const auto& [key, name] : optional) {
    if (!arg(args, key).is_null()) e[name] = s(key);
  }
  e["FSDP_FORWARD_PREFETCH"] = low("fsdp_forward_prefetch");
  e["FSDP_USE_ORIG_PARAMS"] = low("fsdp_use_orig_params");
  e["FSDP_CPU_RAM_EFFICIENT_LOADING"] = low("fsdp_cpu_ram_efficient_loading");
  e["FSDP_SYNC_MODULE_STATES"] = low("fsdp_sync_module_states");
  e["FSDP_ACTIVATION_CHECKPOINTING"] = low("fsdp_activation_checkpointing");
  if (!arg(args, "fsdp_ignored_modules").is_null())
    e["FSDP_IGNORED_MODULES"] = s("fsdp_ignored_modules");
  return {};
}

void megatronEnv(const AccelerateArgs& args, Env& e) {
  e["ACCELERATE_USE_MEGATRON_LM"] = "true";
  e["MEGATRON_LM_TP_DEGREE"] = pythonStr(arg(args, "megatron_lm_tp_degree"));
  e["MEGATRON_LM_USE_CUSTOM_FSDP"] = pythonStr(arg(args, "megatron_lm_use_custom_fsdp"));
  e["MEGATRON_LM_PP_DEGREE"] = pythonStr(arg(args, "megatron_lm_pp_degree"));
  e["MEGATRON_LM_GRADIENT_CLIPPING"] = pythonStr(arg(args, "megatron_lm_gradient_clipping"));
  for (const char* suffix : {"no_load_optim",
                             "eod_mask_loss",
                             "no_save_optim",
                             "optimizer_cpu_offload",
                             "use_precision_aware_optimizer",
                             "overlap_cpu_optimizer_d2h_h2d",
                             "decoder_last_pipeline_num_layers",
                             "num_micro_batches",
                             "sequence_parallelism",
                             "recompute_activations",
                             "use_distributed_optimizer",
                             "recompute_granularity",
                             "recompute_method",
                             "recompute_num_layers",
                             "attention_backend",
                             "expert_model_parallel_size",
                             "context_parallel_size",
                             "attention_dropout",
                             "hidden_dropout",
                             "attention_softmax_in_fp32",
                             "expert_tensor_parallel_size",
                             "calculate_per_token_loss",
                             "use_rotary_position_embeddings"}) {
    const json value = arg(args, std::string("megatron_lm_") + suffix);
    if (!value.is_null()) e["MEGATRON_LM_" + upperCase(suffix)] = pythonStr(value);
  }
}

void parallelismEnv(const AccelerateArgs& args, Env& e) {
  auto s = [&](const char* key) {
    return pythonStr(arg(args, std::string("parallelism_config_") + key));
  };
  e["ACCELERATE_USE_PARALLELISM_CONFIG"] = "true";
  for (const char* key : {"dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "cp_backend",
                          "sp_size", "sp_backend"}) {
    e["PARALLELISM_CONFIG_" + upperCase(key)] = s(key);
  }
  auto above1 = [&](const char* key) {
    const json v = arg(args, std::string("parallelism_config_") + key);
    return v.is_number() && v.get<double>() > 1;
  };
  if (above1("cp_size")) e["PARALLELISM_CONFIG_CP_COMM_STRATEGY"] = s("cp_comm_strategy");
  if (above1("sp_size")) {
    for (const char* key :
         {"sp_seq_length", "sp_seq_length_is_variable", "sp_attn_implementation"}) {
      e["PARALLELISM_CONFIG_" + upperCase(key)] = s(key);
    }
  }
}

// prepare_deepspeed_cmd_env's own variables (PYTHONPATH, the DeepSpeed plugin's settings).
void deepspeedEnv(const AccelerateArgs& args, const AccelerateFacts& f,
                  const probes::Environment& parent, Env& e) {
  std::string pythonPath;
  const std::string inherited = probes::lookup(parent, "PYTHONPATH").value_or("");
  for (std::string_view part : splitOn(inherited, ':')) {
    if (!part.empty()) pythonPath += std::string(part) + ":";
  }
  e["PYTHONPATH"] = pythonPath + f.cwd;
  std::string fields;
  for (const auto& key : f.deepspeed_config_keys) fields += (fields.empty() ? "" : ",") + key;
  if (f.mixed_precision_from_config)
    fields += (fields.empty() ? "" : ",") + std::string("mixed_precision");
  e["ACCELERATE_CONFIG_DS_FIELDS"] = lowerCase(fields);
  e["ACCELERATE_USE_DEEPSPEED"] = "true";
  const std::tuple<const char*, const char*, bool> optional[] = {
      {"zero_stage", "ACCELERATE_DEEPSPEED_ZERO_STAGE", false},
      {"gradient_accumulation_steps", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS", false},
      {"gradient_clipping", "ACCELERATE_GRADIENT_CLIPPING", true},
      {"offload_optimizer_device", "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", true},
      {"offload_param_device", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", true},
      {"zero3_init_flag", "ACCELERATE_DEEPSPEED_ZERO3_INIT", true},
      {"zero3_save_16bit_model", "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", true},
      {"deepspeed_config_file", "ACCELERATE_DEEPSPEED_CONFIG_FILE", false},
      {"deepspeed_moe_layer_cls_names", "ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES", false}};
  for (const auto& [key, name, lowered] : optional) {
    const json value = arg(args, key);
    if (!value.is_null()) e[name] = lowered ? lowerCase(pythonStr(value)) : pythonStr(value);
  }
}

}  // namespace

AccelerateArgs accelerateArgs(const AccelerateNamespace& flags,
                              const config::ClusterConfig& config) {
  AccelerateArgs args(flags.values.begin(), flags.values.end());
  for (const auto& [section, value] : config.extras) {
    if (!value.is_object()) continue;
    for (const auto& [key, entry] : value.items()) {
      const std::string name = namespaceKey(section, key);
      if (!flags.isGiven(name)) args[name] = entry;
    }
  }
  return args;
}

Expected<std::map<std::string, std::string>> accelerateEnvironment(
    const AccelerateArgs& args, const AccelerateFacts& f, const probes::Environment& parent) {
  Env e;
  deviceAndPrecisionEnv(args, f, e);
  switch (f.launcher) {
    case AccelerateLauncher::Simple:
      e["ACCELERATE_USE_CPU"] = f.use_cpu ? "True" : "False";
      if (f.num_processes > 1 || f.num_machines > 1) {
        e["MASTER_ADDR"] = f.main_process_ip.value_or("127.0.0.1");
        e["MASTER_PORT"] = std::to_string(f.main_process_port.value_or(kDefaultMasterPort));
      }
      // accelerate means to set KMP_AFFINITY/KMP_BLOCKTIME for CPU jobs here, but its test
      // (parse_flag_from_env(current_env["ACCELERATE_USE_CPU"])) looks up a variable named "True",
      // so neither 0.27 nor 1.14 ever sets them (recorded in tests/fixtures/accelerate); nor does
      // accel.
      dynamoEnv(args, e);
      e["OMP_NUM_THREADS"] = ompThreads(args, f, parent);
      break;
    case AccelerateLauncher::MultiGpu:
      dynamoEnv(args, e);
      if (truthy(arg(args, "use_fsdp"))) {
        if (auto ok = fsdpEnv(args, e); !ok) return std::move(ok).takeError();
      }
      if (truthy(arg(args, "use_megatron_lm"))) megatronEnv(args, e);
      e["OMP_NUM_THREADS"] = ompThreads(args, f, parent);
      break;
    case AccelerateLauncher::DeepSpeed:
      deepspeedEnv(args, f, parent, e);
      break;
  }
  if (f.enable_cpu_affinity) e["ACCELERATE_CPU_AFFINITY"] = "1";
  if (f.launcher != AccelerateLauncher::Simple && truthy(arg(args, "use_parallelism_config")))
    parallelismEnv(args, e);
  return e;
}

}  // namespace accel::launcher
