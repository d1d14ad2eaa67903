#pragma once
// Internal to the questionnaire: the state its sections share, and the sections that live in
// questionnaire_plugins.cc (torch dynamo, DeepSpeed, FSDP), questionnaire_parallel.cc
// (parallelism_config, Megatron-LM) and questionnaire_fp8.cc. Not for other callers.

#include <string_view>

#include "config/cluster_config.h"
#include "config/paths.h"
#include "config/prompter.h"
#include "libaccel/common/expected.h"

namespace accel::config::detail {

// Propagates a prompter error out of the enclosing section.
#define ACCEL_ASK(var, expr)                                     \
  auto var##_answer = (expr);                                    \
  if (!var##_answer) return std::move(var##_answer).takeError(); \
  auto var = *var##_answer

// What the sections share: the prompter, the answers so far.
struct Session {
  Prompter& ask;
  const PathEnv& env;
  ClusterConfig config;

  bool is(std::string_view type) const { return config.distributed_type == type; }
  // DeepSpeed with its own JSON file, which then decides mixed precision (accelerate asks none).
  bool deepSpeedConfigFile() const;
};

// "Do you wish to optimize your script with torch dynamo?" and, if so, dynamo_config.
Expected<void> askDynamo(Session& s);

// For NO (on a GPU) and MULTI_GPU: "Do you want to use DeepSpeed?"; yes makes the type DEEPSPEED
// and fills deepspeed_config as accelerate's questionnaire does.
Expected<void> askDeepSpeed(Session& s);

// For MULTI_GPU: "Do you want to use FullyShardedDataParallel?"; yes makes the type FSDP and
// fills fsdp_config as accelerate's questionnaire does.
Expected<void> askFsdp(Session& s);

// After mixed precision fp8 was chosen: the FP8 backend and its options → fp8_config.
Expected<void> askFp8(Session& s);

// For FSDP version 2: "Do you want to use the parallelism config?" and, if so,
// parallelism_config (a key accelerate 0.27 rejects, so written only when chosen).
Expected<void> askParallelism(Session& s);

// For MULTI_GPU (not DeepSpeed or FSDP): "Do you want to use Megatron-LM ?"; yes makes the type
// MEGATRON_LM and fills megatron_lm_config as accelerate's questionnaire does.
Expected<void> askMegatron(Session& s);

}  // namespace accel::config::detail
