// The questionnaire's torch dynamo, DeepSpeed and FSDP sections: accelerate's questions (v1.14
// cluster.py), in its order, writing its keys and value spellings, so accelerate's own launch
// reads the file as if it had written it.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "config/questionnaire_session.h"

namespace accel::config::detail {
namespace {

using nlohmann::json;

// accelerate 1.14's menu (its typo 'torhchxla' fixed); the XLA backends need a TPU.
constexpr const char* kXla = "an XLA backend, for TPUs";
const std::vector<Prompter::Option> kDynamoBackends = {"eager",
                                                       "aot_eager",
                                                       "inductor",
                                                       "aot_ts_nvfuser",
                                                       "nvprims_nvfuser",
                                                       "cudagraphs",
                                                       "ofi",
                                                       "fx2trt",
                                                       "onnxrt",
                                                       "tensorrt",
                                                       {"aot_torchxla_trace_once", kXla},
                                                       {"torchxla_trace_once", kXla},
                                                       "tvm"};
const std::vector<std::string> kDynamoModes = {"default", "reduce-overhead", "max-autotune"};

const std::vector<std::string> kOffloadDevices = {"none", "cpu", "nvme"};
// DEEPSPEED_MULTINODE_LAUNCHERS; accel starts one agent per node itself ('standard').
constexpr const char* kOwnLauncher =
    "DeepSpeed's own multi-node launchers; accel starts one agent per node";
const std::vector<Prompter::Option> kDeepSpeedLaunchers = {
    {"pdsh", kOwnLauncher},    "standard",
    {"openmpi", kOwnLauncher}, {"mvapich", kOwnLauncher},
    {"mpich", kOwnLauncher},   {"nossh", kOwnLauncher},
    {"slurm", kOwnLauncher}};
constexpr int kStandardLauncher = 1;

const std::vector<std::string> kShardingStrategies = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD",
                                                      "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
const std::vector<std::string> kWrapPolicies = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP",
                                                "NO_WRAP"};
const std::vector<std::string> kBackwardPrefetch = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"};
const std::vector<std::string> kStateDictTypes = {"FULL_STATE_DICT", "LOCAL_STATE_DICT",
                                                  "SHARDED_STATE_DICT"};
const std::vector<std::string> kFsdp2StateDictTypes = {"SHARDED_STATE_DICT", "FULL_STATE_DICT"};

std::vector<Prompter::Option> options(const std::vector<std::string>& labels) {
  return {labels.begin(), labels.end()};
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::optional<std::string> checkRequired(const std::string& s) {
  if (s.empty()) return "an answer is required";
  return std::nullopt;
}

std::optional<std::string> checkAtLeastOne(const int& n) {
  if (n >= 1) return std::nullopt;
  return "must be at least 1";
}

// A positive decimal number (accelerate's `float` answers), or why not.
std::optional<std::string> checkPositiveNumber(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    return "'" + s + "' is not a number";
  if (v <= 0) return "must be greater than 0";
  return std::nullopt;
}

// The torch.compile defaults, asked only when the user customises them.
Expected<void> askDynamoOptions(Session& s, json& section) {
  ACCEL_ASK(mode, s.ask.menu("Which mode do you want to use?", options(kDynamoModes), 0));
  section["dynamo_mode"] = kDynamoModes[static_cast<size_t>(mode)];
  ACCEL_ASK(fullgraph,
            s.ask.yesNo(
                "Do you want the fullgraph mode or it is ok to break model into several subgraphs?",
                false));
  section["dynamo_use_fullgraph"] = fullgraph;
  ACCEL_ASK(dynamic, s.ask.yesNo("Do you want to enable dynamic shape tracing?", false));
  section["dynamo_use_dynamic"] = dynamic;
  ACCEL_ASK(regional, s.ask.yesNo("Do you want to enable regional compilation?", false));
  section["dynamo_use_regional_compilation"] = regional;
  return {};
}

// Offload targets, asked for ZeRO stage 2 and 3 only.
Expected<void> askZeroOffload(Session& s, json& ds) {
  ACCEL_ASK(optimizer,
            s.ask.menu("Where to offload optimizer states?", options(kOffloadDevices), 0));
  ds["offload_optimizer_device"] = kOffloadDevices[static_cast<size_t>(optimizer)];
  ACCEL_ASK(param, s.ask.menu("Where to offload parameters?", options(kOffloadDevices), 0));
  ds["offload_param_device"] = kOffloadDevices[static_cast<size_t>(param)];
  if (kOffloadDevices[static_cast<size_t>(param)] == "nvme") {
    ACCEL_ASK(path,
              s.ask.text("Nvme Path to offload parameters?", std::string("/nvme"), checkRequired));
    ds["offload_param_nvme_path"] = path;
  }
  if (kOffloadDevices[static_cast<size_t>(optimizer)] == "nvme") {
    ACCEL_ASK(path, s.ask.text("Nvme Path to offload optimizer states?", std::string("/nvme"),
                               checkRequired));
    ds["offload_optimizer_nvme_path"] = path;
  }
  return {};
}

// Without a DeepSpeed JSON file: ZeRO stage, offload, accumulation, clipping, 16-bit saving.
Expected<void> askZero(Session& s, json& ds) {
  ACCEL_ASK(stage, s.ask.menu("What should be your DeepSpeed's ZeRO optimization stage?",
                              {"0", "1", "2", "3"}, 2));
  ds["zero_stage"] = stage;
  if (stage >= 2) {
    if (auto ok = askZeroOffload(s, ds); !ok) return ok;
  }
  ACCEL_ASK(steps,
            s.ask.integer("How many gradient accumulation steps you're passing in your script?", 1,
                          checkAtLeastOne));
  ds["gradient_accumulation_steps"] = steps;
  ACCEL_ASK(clipping, s.ask.yesNo("Do you want to use gradient clipping?", false));
  if (clipping) {
    ACCEL_ASK(value, s.ask.text("What is the gradient clipping value?", std::string("1.0"),
                                checkPositiveNumber));
    ds["gradient_clipping"] = std::strtod(value.c_str(), nullptr);
  }
  if (stage == 3) {
    ACCEL_ASK(
        save16,
        s.ask.yesNo("Do you want to save 16-bit model weights when using ZeRO Stage-3?", false));
    ds["zero3_save_16bit_model"] = save16;
  }
  return {};
}

// The questions accelerate asks with or without a DeepSpeed JSON file.
Expected<void> askDeepSpeedCommon(Session& s, json& ds) {
  ACCEL_ASK(
      init,
      s.ask.yesNo(
          "Do you want to enable `deepspeed.zero.Init` when using ZeRO Stage-3 for constructing "
          "massive models?",
          false));
  ds["zero3_init_flag"] = init;
  ACCEL_ASK(moe, s.ask.yesNo("Do you want to enable Mixture-of-Experts training (MoE)?", false));
  if (moe) {
    ACCEL_ASK(
        names,
        s.ask.text("Specify the comma-separated list of transformers MoE layer class names "
                   "(case-sensitive), e.g :  `MixtralSparseMoeBlock`, `Qwen2MoeSparseMoeBlock`, "
                   "`JetMoEAttention,JetMoEBlock` ...",
                   std::nullopt, checkRequired));
    ds["deepspeed_moe_layer_cls_names"] = names;
  }
  if (s.config.num_machines > 1) {
    ACCEL_ASK(launcher, s.ask.menu("Which Type of launcher do you want to use?",
                                   kDeepSpeedLaunchers, kStandardLauncher));
    ds["deepspeed_multinode_launcher"] = kDeepSpeedLaunchers[static_cast<size_t>(launcher)].label;
  }
  return {};
}

// FSDP's sharding: a strategy for version 1, a yes/no for version 2.
Expected<void> askFsdpSharding(Session& s, json& fsdp, int version) {
  if (version == 1) {
    ACCEL_ASK(strategy, s.ask.menu("What should be your sharding strategy?",
                                   options(kShardingStrategies), 0));
    fsdp["fsdp_reshard_after_forward"] = kShardingStrategies[static_cast<size_t>(strategy)];
    return {};
  }
  ACCEL_ASK(reshard, s.ask.yesNo("Do you want to enable resharding after forward?", true));
  fsdp["fsdp_reshard_after_forward"] = reshard;
  return {};
}

// The auto wrap policy and what it needs (layer classes, or a minimum parameter count).
Expected<void> askFsdpWrap(Session& s, json& fsdp) {
  ACCEL_ASK(policy, s.ask.menu("What should be your auto wrap policy?", options(kWrapPolicies), 0));
  fsdp["fsdp_auto_wrap_policy"] = kWrapPolicies[static_cast<size_t>(policy)];
  if (policy == 0) {
    ACCEL_ASK(noSplit,
              s.ask.yesNo(
                  "Do you want to use the model's `_no_split_modules` to wrap. Only applicable for "
                  "\U0001F917 Transformers",
                  false));
    if (!noSplit) {
      ACCEL_ASK(classes,
                s.ask.text("Specify the comma-separated list of transformer layer class names "
                           "(case-sensitive) to wrap ,e.g, :`BertLayer`, `GPTJBlock`, `T5Block`, "
                           "`BertLayer,BertEmbeddings,BertSelfOutput` ...?",
                           std::nullopt, checkRequired));
      fsdp["fsdp_transformer_layer_cls_to_wrap"] = classes;
    }
  } else if (policy == 1) {
    ACCEL_ASK(
        minimum,
        s.ask.integer("What should be your FSDP's minimum number of parameters for Default Auto "
                      "Wrapping Policy?",
                      100000000, checkAtLeastOne));
    fsdp["fsdp_min_num_params"] = minimum;
  }
  return {};
}

// Prefetching, state dict, use_orig_params, loading and checkpointing, after the wrap policy.
Expected<void> askFsdpRest(Session& s, json& fsdp, int version) {
  if (version == 1) {
    ACCEL_ASK(prefetch, s.ask.menu("What should be your FSDP's backward prefetch policy?",
                                   options(kBackwardPrefetch), 0));
    fsdp["fsdp_backward_prefetch"] = kBackwardPrefetch[static_cast<size_t>(prefetch)];
  }
  const auto& types = version == 1 ? kStateDictTypes : kFsdp2StateDictTypes;
  ACCEL_ASK(stateDict,
            s.ask.menu("What should be your FSDP's state dict type?", options(types), 0));
  fsdp["fsdp_state_dict_type"] = types[static_cast<size_t>(stateDict)];
  if (version == 1) {
    ACCEL_ASK(forward, s.ask.yesNo("Do you want to enable FSDP's forward prefetch policy?", false));
    fsdp["fsdp_forward_prefetch"] = forward;
    ACCEL_ASK(orig, s.ask.yesNo("Do you want to enable FSDP's `use_orig_params` feature?", true));
    fsdp["fsdp_use_orig_params"] = orig;
  }
  ACCEL_ASK(
      efficient,
      s.ask.yesNo("Do you want to enable CPU RAM efficient model loading? Only applicable for "
                  "\U0001F917 Transformers models.",
                  true));
  fsdp["fsdp_cpu_ram_efficient_loading"] = efficient;
  if (version == 1) {
    bool sync = true;  // implied by efficient loading, as in accelerate
    if (!efficient) {
      ACCEL_ASK(
          answer,
          s.ask.yesNo(
              "Do you want each individually wrapped FSDP unit to broadcast module parameters "
              "from rank 0 at the start?",
              true));
      sync = answer;
    }
    fsdp["fsdp_sync_module_states"] = sync;
  }
  ACCEL_ASK(checkpointing,
            s.ask.yesNo("Do you want to enable FSDP activation checkpointing?", false));
  fsdp["fsdp_activation_checkpointing"] = checkpointing;
  return {};
}

}  // namespace

Expected<void> askDynamo(Session& s) {
  ACCEL_ASK(dynamo, s.ask.yesNo("Do you wish to optimize your script with torch dynamo?", false));
  if (!dynamo) return {};
  json section;
  ACCEL_ASK(backend, s.ask.menu("Which dynamo backend would you like to use?", kDynamoBackends, 2));
  section["dynamo_backend"] = upper(kDynamoBackends[static_cast<size_t>(backend)].label);
  ACCEL_ASK(customize,
            s.ask.yesNo("Do you want to customize the defaults sent to torch.compile?", false));
  if (customize) {
    if (auto ok = askDynamoOptions(s, section); !ok) return ok;
  }
  s.config.extras["dynamo_config"] = section;
  return {};
}

Expected<void> askDeepSpeed(Session& s) {
  if (!(s.is(kDistributedNo) || s.is(kDistributedMultiGpu)) || s.config.use_cpu) return {};
  ACCEL_ASK(use, s.ask.yesNo("Do you want to use DeepSpeed?", false));
  if (!use) return {};
  s.config.distributed_type = std::string(kDistributedDeepSpeed);
  json ds = json::object();
  ACCEL_ASK(file, s.ask.yesNo("Do you want to specify a json file to a DeepSpeed config?", false));
  if (file) {
    ACCEL_ASK(path, s.ask.text("Please enter the path to the json DeepSpeed config file",
                               std::nullopt, checkRequired));
    ds["deepspeed_config_file"] = expandUser(path, s.env);
  } else if (auto ok = askZero(s, ds); !ok) {
    return ok;
  }
  if (auto ok = askDeepSpeedCommon(s, ds); !ok) return ok;
  s.config.extras["deepspeed_config"] = ds;
  return {};
}

Expected<void> askFsdp(Session& s) {
  if (!s.is(kDistributedMultiGpu)) return {};
  ACCEL_ASK(use, s.ask.yesNo("Do you want to use FullyShardedDataParallel?", false));
  if (!use) return {};
  s.config.distributed_type = std::string(kDistributedFsdp);
  json fsdp = json::object();
  // Labelled FSDP1/FSDP2, not 1/2: menus are answered by index, and "1" would pick version 2.
  ACCEL_ASK(versionIndex, s.ask.menu("What should be your FSDP version?", {"FSDP1", "FSDP2"}, 1));
  const int version = versionIndex + 1;
  fsdp["fsdp_version"] = version;
  if (auto ok = askFsdpSharding(s, fsdp, version); !ok) return ok;
  ACCEL_ASK(offload, s.ask.yesNo("Do you want to offload parameters and gradients to CPU?", false));
  fsdp["fsdp_offload_params"] = offload;
  if (auto ok = askFsdpWrap(s, fsdp); !ok) return ok;
  if (auto ok = askFsdpRest(s, fsdp, version); !ok) return ok;
  s.config.extras["fsdp_config"] = fsdp;
  return {};
}

}  // namespace accel::config::detail
