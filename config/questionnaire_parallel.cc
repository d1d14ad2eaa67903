// The questionnaire's model-parallel sections: FSDP2's parallelism_config and
// Megatron-LM, as accelerate 1.14's cluster.py asks them, writing its keys
// (prefixed, as its launch reads them).
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "config/questionnaire_session.h"

namespace accel::config::detail {
namespace {

using nlohmann::json;

const std::vector<std::string> kCpCommStrategies = {"allgather", "alltoall"};

std::optional<std::string> checkAtLeastOne(const int& n) {
  if (n >= 1) return std::nullopt;
  return "must be at least 1";
}

// accelerate's `float` answer where 0 means "off" (Megatron-LM's gradient
// clipping).
std::optional<std::string> checkNonNegativeNumber(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    return "'" + s + "' is not a number";
  if (v < 0) return "must be 0 (off) or more";
  return std::nullopt;
}

bool fsdpVersion2(const Session& s) {
  auto it = s.config.extras.find("fsdp_config");
  return s.is(kDistributedFsdp) && it != s.config.extras.end() &&
         it->second.value("fsdp_version", 1) == 2;
}

// Tensor and pipeline degrees, with the questions each implies when above 1.
Expected<void> askMegatronDegrees(Session& s, json& m) {
  ACCEL_ASK(tp, s.ask.integer("What is the Tensor Parallelism degree/size?", 1, checkAtLeastOne));
  m["megatron_lm_tp_degree"] = tp;
  if (tp > 1) {
    ACCEL_ASK(sequence, s.ask.yesNo("Do you want to enable Sequence Parallelism?", true));
    m["megatron_lm_sequence_parallelism"] = sequence;
  }
  ACCEL_ASK(pp, s.ask.integer("What is the Pipeline Parallelism degree/size?", 1, checkAtLeastOne));
  m["megatron_lm_pp_degree"] = pp;
  if (pp > 1) {
    ACCEL_ASK(micro, s.ask.integer("What is the number of micro-batches?", 1, checkAtLeastOne));
    m["megatron_lm_num_micro_batches"] = micro;
  }
  return {};
}

}  // namespace

Expected<void> askParallelism(Session& s) {
  if (!fsdpVersion2(s)) return {};
  ACCEL_ASK(use, s.ask.yesNo("Do you want to use the parallelism config?", false));
  if (!use) return {};
  json p = json::object();
  const std::pair<const char*, const char*> sizes[] = {
      {"parallelism_config_dp_replicate_size", "What is the data parallelism replicate size?"},
      {"parallelism_config_dp_shard_size", "What is the FSDP shard size?"},
      {"parallelism_config_tp_size", "What is the tensor parallelism size?"},
      {"parallelism_config_cp_size", "What is the context parallelism size?"}};
  for (const auto& [key, question] : sizes) {
    ACCEL_ASK(size, s.ask.integer(question, 1, checkAtLeastOne));
    p[key] = size;
  }
  if (p["parallelism_config_cp_size"].get<int>() > 1) {
    std::vector<Prompter::Option> strategies(kCpCommStrategies.begin(), kCpCommStrategies.end());
    ACCEL_ASK(strategy,
              s.ask.menu("What is the compute parallelism communication strategy?", strategies, 0));
    p["parallelism_config_cp_comm_strategy"] = kCpCommStrategies[static_cast<size_t>(strategy)];
  }
  s.config.extras["parallelism_config"] = p;
  return {};
}

Expected<void> askMegatron(Session& s) {
  if (!s.is(kDistributedMultiGpu)) return {};
  ACCEL_ASK(use, s.ask.yesNo("Do you want to use Megatron-LM ?", false));
  if (!use) return {};
  s.config.distributed_type = std::string(kDistributedMegatronLm);
  json m = json::object();
  if (auto ok = askMegatronDegrees(s, m); !ok) return ok;
  ACCEL_ASK(recompute,
            s.ask.yesNo("Do you want to enable selective activation recomputation?", true));
  m["megatron_lm_recompute_activations"] = recompute;
  ACCEL_ASK(distributed, s.ask.yesNo("Do you want to use distributed optimizer "
                                     "which shards optimizer state and "
                                     "gradients across data parallel ranks?",
                                     true));
  m["megatron_lm_use_distributed_optimizer"] = distributed;
  ACCEL_ASK(clipping, s.ask.text("What is the gradient clipping value based on "
                                 "global L2 Norm (0 to disable)?",
                                 std::string("1.0"), checkNonNegativeNumber));
  m["megatron_lm_gradient_clipping"] = std::strtod(clipping.c_str(), nullptr);
  s.config.extras["megatron_lm_config"] = m;
  return {};
}

}  // namespace accel::config::detail
