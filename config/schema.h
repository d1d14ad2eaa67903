#pragma once
// The schema of accelerate's `default_config.yaml` (its ClusterConfig): every top-level key,
// the kind of value it holds, the values it allows, and how to suggest a key for a typo.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel::config {

enum class Kind {
  Bool,          // true/false (YAML 1.1 spellings accepted: yes/no/on/off, any case)
  Int,           // integer in [min, max]
  String,        // any scalar, read as text; `choices` restricts it when non-empty
  StringList,    // a sequence of scalars
  Mapping,       // a nested section, carried through without interpretation
  BoolOrString,  // accelerate writes both `false` and 'no' (downcast_bf16)
};

struct FieldSpec {
  std::string_view name;
  Kind kind;
  std::vector<std::string_view> choices;  // String only; empty = any text
  long long min = 0;                      // Int only
  long long max = 0;                      // Int only
  bool legacy = false;  // accepted on load and migrated away (fp16, dynamo_backend)
};

// Every key a config file may hold, current and legacy, in accelerate's field order.
const std::vector<FieldSpec>& fieldSpecs();

// The spec for `name`, or nullptr if the key is unknown.
const FieldSpec* findField(std::string_view name);

// The valid, non-legacy key closest to `name` by edit distance, if one is close enough to be
// a plausible typo (distance ≤ max(2, len/3)).
std::optional<std::string_view> suggestKey(std::string_view name);

// Levenshtein distance with unit costs (exposed for tests).
size_t editDistance(std::string_view a, std::string_view b);

// "a, b, c" — used in error messages that list allowed values.
std::string joinChoices(const std::vector<std::string_view>& choices);

// Why `ids` is not a valid gpu_ids value ("all" or a comma-separated list of distinct
// non-negative integers), or nullopt when it is. The reason quotes the value:
// "'0,,1': empty id at position 2" (after "--gpu_ids: ", or "'gpu_ids' is ").
std::optional<std::string> checkGpuIds(std::string_view ids);

// accelerate's distributed types (all accepted in files; `accel config` writes these six).
inline constexpr std::string_view kDistributedNo = "NO";
inline constexpr std::string_view kDistributedMultiCpu = "MULTI_CPU";
inline constexpr std::string_view kDistributedMultiGpu = "MULTI_GPU";
inline constexpr std::string_view kDistributedDeepSpeed = "DEEPSPEED";
inline constexpr std::string_view kDistributedFsdp = "FSDP";
inline constexpr std::string_view kDistributedMegatronLm = "MEGATRON_LM";
inline constexpr std::string_view kLocalMachine = "LOCAL_MACHINE";

}  // namespace accel::config
