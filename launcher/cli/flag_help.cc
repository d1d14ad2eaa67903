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

namespace {

// accelerate's groups of launch flags, in its order, then torchrun's and accel's own. `brief`:
// listed by name only in the short help.
struct HelpGroup {
  const char* key;
  const char* title;
  bool brief;
};
constexpr HelpGroup kGroups[] = {
    {"general", "General", false},
    {"hardware", "Hardware selection", false},
    {"resources", "Resource selection", false},
    {"dynamo", "torch dynamo (torch.compile)", true},
    {"paradigm", "Training paradigm", false},
    {"distributed", "Distributed: machines, ports, logs, restarts", false},
    {"torchrun", "torchrun's own", false},
    {"tpu", "TPU and AWS (refused or ignored)", true},
    {"deepspeed", "DeepSpeed", true},
    {"fsdp", "FSDP", true},
    {"megatron", "Megatron-LM", true},
    {"fp8", "fp8", true},
    {"parallelism", "Parallelism config", true},
    {"accel", "accel's own", false},
    {"health", "Healthy machines: health checks and stragglers", true},
};

bool startsWith(std::string_view s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

// Which group a flag is shown in (kGroups' key), by where it comes from and its dest.
std::string_view groupOf(const FlagSpec& f) {
  const std::string_view d = f.dest;
  if (f.origin == kFromAccel) {
    return startsWith(d, "health_check") || startsWith(d, "straggler_") ? "health" : "accel";
  }
  if (f.origin == kFromTorchrun) return "torchrun";
  if (d == "config_file" || d == "quiet" || d == "debug") return "general";
  if (d == "cpu" || d == "multi_gpu" || d == "tpu" || d == "ipex" || d == "use_xpu")
    return "hardware";
  if (d == "mixed_precision" || d == "num_processes" || d == "num_machines" ||
      d == "num_cpu_threads_per_process" || d == "enable_cpu_affinity")
    return "resources";
  if (startsWith(d, "dynamo_")) return "dynamo";
  if (startsWith(d, "use_")) return "paradigm";
  if (startsWith(d, "tpu_") || startsWith(d, "aws_") || d == "vm" || d == "env" ||
      d == "main_training_function" || d == "downcast_bf16")
    return "tpu";
  if (startsWith(d, "deepspeed_") || startsWith(d, "zero") || startsWith(d, "offload_") ||
      d == "gradient_accumulation_steps" || d == "gradient_clipping")
    return "deepspeed";
  if (startsWith(d, "fsdp_")) return "fsdp";
  if (startsWith(d, "megatron_lm_")) return "megatron";
  if (startsWith(d, "fp8_")) return "fp8";
  if (startsWith(d, "parallelism_config_")) return "parallelism";
  return "distributed";
}

// What a flag's value is called, as argparse calls it: {a,b,c} for a choice, else the dest in
// capitals ("NUM_PROCESSES").
std::string metavar(const FlagSpec& f) {
  std::string name;
  if (!f.choices.empty()) {
    for (auto c : f.choices) name += (name.empty() ? "{" : ",") + std::string(c);
    return name + "}";
  }
  for (char c : f.dest) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// "  --num_processes, -n NUM_PROCESSES
//                                     Total number of processes over all machines"
std::string flagLine(const FlagSpec& f) {
  std::string names;
  for (auto n : f.names) names += (names.empty() ? "" : ", ") + std::string(n);
  if (f.arity == FlagArity::Value || f.arity == FlagArity::Append) names += " " + metavar(f);
  const size_t column = 36;
  std::string line = "  " + names;
  line += line.size() + 2 <= column ? std::string(column - line.size(), ' ')
                                    : "\n" + std::string(column, ' ');
  return line + whatItDoes(f) + "\n";
}

std::vector<const FlagSpec*> groupFlags(std::string_view key, LaunchMode mode) {
  std::vector<const FlagSpec*> out;
  for (const auto& f : launchFlags())
    if (allowedIn(f, mode) && groupOf(f) == key) out.push_back(&f);
  return out;
}

}  // namespace

std::vector<std::string> launchHelpTopics() {
  std::vector<std::string> topics{"all"};
  for (const auto& g : kGroups) topics.emplace_back(g.key);
  return topics;
}

std::optional<std::string> launchHelp(LaunchMode mode, const std::string& topic) {
  const bool known = topic.empty() || topic == "all" ||
                     std::any_of(std::begin(kGroups), std::end(kGroups),
                                 [&](const HelpGroup& g) { return topic == g.key; });
  if (!known) return std::nullopt;
  const char* command = mode == LaunchMode::Torchrun ? "run" : "launch";
  std::string out = std::string("usage: accel ") + command +
                    " [flags] SCRIPT.py|BINARY [args...]   (" +
                    (mode == LaunchMode::Torchrun ? "torchrun's flags and defaults"
                                                  : "accelerate's and torchrun's flags") +
                    ")\n";
  std::string more;
  for (const auto& g : kGroups) {
    if (!topic.empty() && topic != "all" && topic != g.key) continue;
    const auto flags = groupFlags(g.key, mode);
    if (flags.empty()) continue;
    if (topic.empty() && g.brief) {
      more += "  " + std::string(g.title) + ": " + std::to_string(flags.size()) + " flag" +
              (flags.size() == 1 ? "" : "s") + ", --help-" + g.key + "\n";
      continue;
    }
    out += "\n" + std::string(g.title) + " (--help-" + g.key + "):\n";
    for (const FlagSpec* f : flags) out += flagLine(*f);
  }
  if (!more.empty()) out += "\nMore (each with its own help; --help-all for every flag):\n" + more;
  out +=
      "\nEvery long flag may be written with dashes or underscores, and abbreviated to a unique "
      "prefix.\n";
  return out;
}

}  // namespace accel::launcher
