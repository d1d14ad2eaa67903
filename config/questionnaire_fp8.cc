// The questionnaire's fp8 section: accelerate 1.14's questions for each FP8 backend, writing its
// fp8_config (a key accelerate 0.27 rejects, so present only when fp8 was chosen).
#include <algorithm>
#include <cctype>

#include "config/questionnaire_session.h"

namespace accel::config::detail {
namespace {

using nlohmann::json;

const std::vector<std::string> kBackends = {"ao", "te", "msamp"};
const std::vector<std::string> kFormats = {"HYBRID", "E4M3", "E5M2"};
const std::vector<std::string> kAmaxAlgorithms = {"max", "most_recent"};
const std::vector<std::string> kOptimizationLevels = {"O1", "O2"};

std::vector<Prompter::Option> options(const std::vector<std::string>& labels) {
  return {labels.begin(), labels.end()};
}

Prompter::Check<int> checkAtLeast(int least) {
  return [least](const int& n) -> std::optional<std::string> {
    if (n >= least) return std::nullopt;
    return "must be at least " + std::to_string(least);
  };
}

// Which of fprop, dgrad and wgrad run in higher precision: [false, false, false] unless asked.
Expected<void> askTeOverride(Session& s, json& fp8) {
  ACCEL_ASK(
      override,
      s.ask.yesNo(
          "Do you want to to execute `fprop`, `dgrad`, and `wgrad` GEMMS in higher precision?",
          false));
  json gemms = json::array({false, false, false});
  if (override) {
    int i = 0;
    for (const char* gemm : {"fprop", "dgrad", "wgrad"}) {
      ACCEL_ASK(higher,
                s.ask.yesNo(std::string("Should `") + gemm + "` be executed in higher precision?",
                            false));
      gemms[i++] = higher;
    }
  }
  fp8["override_linear_precision"] = gemms;
  return {};
}

// Transformer Engine's recipe.
Expected<void> askTe(Session& s, json& fp8) {
  ACCEL_ASK(
      eval,
      s.ask.yesNo(
          "Do you want to use FP8 autocast during eval mode? Generally better metrics are found "
          "when this is disabled",
          false));
  fp8["use_autocast_during_eval"] = eval;
  ACCEL_ASK(margin,
            s.ask.integer("What margin should be used for gradient scaling?", 0, checkAtLeast(0)));
  fp8["margin"] = margin;
  ACCEL_ASK(interval,
            s.ask.integer(
                "What interval should be used for for how often the scaling factor is recomputed?",
                1, checkAtLeast(1)));
  fp8["interval"] = interval;
  ACCEL_ASK(format, s.ask.menu("Which weight format should be used?", options(kFormats), 0));
  fp8["fp8_format"] = kFormats[static_cast<size_t>(format)];
  ACCEL_ASK(history,
            s.ask.integer(
                "What length of history should be used for the amax scaling factor computation?",
                1024, checkAtLeast(1)));
  fp8["amax_history_length"] = history;
  ACCEL_ASK(algorithm,
            s.ask.menu("Which algorithm should be used for the amax scaling factor computation?",
                       options(kAmaxAlgorithms), 0));
  fp8["amax_compute_algorithm"] = kAmaxAlgorithms[static_cast<size_t>(algorithm)];
  return askTeOverride(s, fp8);
}

// torchao's float8 options.
Expected<void> askAo(Session& s, json& fp8) {
  ACCEL_ASK(
      gather,
      s.ask.yesNo("Do you want to enable FSDP2 float8 all gather? This is recommended for better "
                  "performance if using FSDP2.",
                  true));
  fp8["enable_fsdp_float8_all_gather"] = gather;
  ACCEL_ASK(
      pad,
      s.ask.yesNo(
          "Do you want to pad the inner dimension of weight matrices before float8 matmuls? This "
          "is required for _scaled_mm which has strict alignment requirements. Note: padding may "
          "cause memory spikes.",
          true));
  fp8["pad_inner_dim"] = pad;
  return {};
}

}  // namespace

Expected<void> askFp8(Session& s) {
  ACCEL_ASK(backend, s.ask.menu("Which FP8 backend do you want to use?", options(kBackends), 0));
  std::string name = kBackends[static_cast<size_t>(backend)];
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  json fp8 = {{"backend", name}};
  if (name == "TE") {
    if (auto ok = askTe(s, fp8); !ok) return ok;
  } else if (name == "MSAMP") {
    ACCEL_ASK(level, s.ask.menu("Which optimization level should be used?",
                                options(kOptimizationLevels), 1));
    fp8["optimization_level"] = kOptimizationLevels[static_cast<size_t>(level)];
  } else if (auto ok = askAo(s, fp8); !ok) {
    return ok;
  }
  s.config.extras["fp8_config"] = fp8;
  return {};
}

}  // namespace accel::config::detail
