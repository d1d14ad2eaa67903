// The help text and README table of the launch flags (launch_flags.h).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/schema.h"
#include "launcher/base/text.h"
#include "launcher/cli/launch_flags.h"

namespace accel::launcher {
namespace {

// What a flag does, in one line: its help, or for the paradigm sections the variable it sets.
std::string whatItDoes(const FlagSpec& f) {
  if (f.use == FlagUse::Notice) return "accepted, ignored with a notice: " + std::string(f.why);
  if (f.use == FlagUse::Refuse) return "refused: " + std::string(f.why);
  if (!f.help.empty()) return std::string(f.help);
  const std::string dest(f.dest);
  const std::pair<const char*, const char*> sections[] = {
      {"fsdp_", "FSDP_%s (FSDP jobs)"},
      {"megatron_lm_", "MEGATRON_LM_%s (Megatron-LM jobs)"},
      {"fp8_", "ACCELERATE_FP8_%s (mixed_precision fp8)"},
      {"parallelism_config_", "PARALLELISM_CONFIG_%s (with --use_parallelism_config)"}};
  for (const auto& [prefix, pattern] : sections) {
    if (dest.rfind(prefix, 0) != 0) continue;
    std::string name = upperCase(dest.substr(std::string(prefix).size()));
    if (dest == "fsdp_transformer_layer_cls_to_wrap") name = "TRANSFORMER_CLS_TO_WRAP";
    if (dest == "fp8_override_linear_precision") name = "OVERRIDE_{FPROP,DGRAD,WGRAD}";
    std::string text(pattern);
    return text.replace(text.find("%s"), 2, name);
  }
  return "worker environment, as accelerate sets it";
}

}  // namespace

std::string launchFlagsMarkdown() {
  std::string out = "| Flag | From | What accel does |\n|---|---|---|\n";
  for (const auto& f : launchFlags()) {
    std::string names;
    for (auto n : f.names) names += (names.empty() ? "`" : ", `") + std::string(n) + "`";
    std::string from;
    for (auto [bit, name] : {std::pair{kFromAccelerate, "accelerate"},
                             {kFromTorchrun, "torchrun"},
                             {kFromAccel, "accel"}}) {
      if (f.origin & bit) from += (from.empty() ? "" : ", ") + std::string(name);
    }
    std::string what;
    for (char c : whatItDoes(f))
      what += c == '|' ? std::string("\\|") : std::string(1, c);  // a table cell
    out += "| " + names + " | " + from + " | " + what + " |\n";
  }
  return out;
}

std::string launchHelp(LaunchMode mode) {
  std::string out = mode == LaunchMode::Torchrun
                        ? "usage: accel run [flags] SCRIPT.py|BINARY [args...]   (torchrun's flags "
                          "and defaults)\n\n"
                        : "usage: accel launch [flags] SCRIPT.py|BINARY [args...]   (accelerate's "
                          "and torchrun's flags)\n\n";
  for (const auto& f : launchFlags()) {
    if (!allowedIn(f, mode)) continue;
    std::string names;
    for (auto n : f.names) names += (names.empty() ? "" : ", ") + std::string(n);
    if (f.arity == FlagArity::Value || f.arity == FlagArity::Append) names += " VALUE";
    out += "  " + names + "\n      " + whatItDoes(f) + "\n";
  }
  out +=
      "\nEvery long flag may be written with dashes or underscores, and abbreviated to a unique "
      "prefix.\n";
  return out;
}

}  // namespace accel::launcher
