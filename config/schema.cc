#include "config/schema.h"

#include <algorithm>

namespace accel::config {

const std::vector<FieldSpec>& fieldSpecs() {
  static const std::vector<FieldSpec> kSpecs = {
      {"compute_environment", Kind::String, {"LOCAL_MACHINE", "AMAZON_SAGEMAKER"}},
      {"distributed_type",
       Kind::String,
       {"NO", "MULTI_CPU", "MULTI_XPU", "MULTI_HPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU",
        "MULTI_SDAA", "MULTI_MUSA", "MULTI_NEURON", "XLA", "DEEPSPEED", "FSDP", "MEGATRON_LM"}},
      {"mixed_precision", Kind::String, {"no", "fp16", "bf16", "fp8"}},
      {"use_cpu", Kind::Bool, {}},
      {"debug", Kind::Bool, {}},
      {"num_processes", Kind::Int, {}, -1, 1 << 20},
      {"machine_rank", Kind::Int, {}, 0, 1 << 20},
      {"num_machines", Kind::Int, {}, 1, 1 << 20},
      {"gpu_ids", Kind::String, {}},
      {"main_process_ip", Kind::String, {}},
      {"main_process_port", Kind::Int, {}, 0, 65535},
      {"rdzv_backend", Kind::String, {"static", "c10d", "etcd", "etcd-v2"}},
      {"same_network", Kind::Bool, {}},
      {"main_training_function", Kind::String, {}},
      {"enable_cpu_affinity", Kind::Bool, {}},
      {"hang_timeout",
       Kind::Int,
       {},
       1,
       1 << 30},  // accel's own (seconds): accelerate does not know it
      {"exit_timeout", Kind::Int, {}, 1, 1 << 30},  // accel's own (seconds)
      {"accel_python", Kind::String, {}},           // accel's own: the interpreter for .py scripts
      {"downcast_bf16", Kind::BoolOrString, {}},
      {"tpu_name", Kind::String, {}},
      {"tpu_zone", Kind::String, {}},
      {"tpu_use_cluster", Kind::Bool, {}},
      {"tpu_use_sudo", Kind::Bool, {}},
      {"command_file", Kind::String, {}},
      {"commands", Kind::StringList, {}},
      {"tpu_vm", Kind::StringList, {}},
      {"tpu_env", Kind::StringList, {}},
      {"fp8_config", Kind::Mapping, {}},
      {"deepspeed_config", Kind::Mapping, {}},
      {"fsdp_config", Kind::Mapping, {}},
      {"parallelism_config", Kind::Mapping, {}},
      {"megatron_lm_config", Kind::Mapping, {}},
      {"mpirun_config", Kind::Mapping, {}},
      {"dynamo_config", Kind::Mapping, {}},
      {"ipex_config", Kind::Mapping, {}},  // written by accelerate 0.28–0.3x
      {"fp16", Kind::Bool, {}, 0, 0, /*legacy=*/true},
      {"dynamo_backend", Kind::String, {}, 0, 0, /*legacy=*/true},
  };
  return kSpecs;
}

const FieldSpec* findField(std::string_view name) {
  for (const auto& spec : fieldSpecs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> suggestKey(std::string_view name) {
  std::optional<std::string_view> best;
  size_t bestDistance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& spec : fieldSpecs()) {
    if (spec.legacy) continue;
    size_t d = editDistance(name, spec.name);
    if (d < bestDistance) {
      bestDistance = d;
      best = spec.name;
    }
  }
  return best;
}

std::string joinChoices(const std::vector<std::string_view>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) out += ", ";
    out += choices[i];
  }
  return out;
}

std::optional<std::string> checkGpuIds(std::string_view ids) {
  if (ids == "all") return std::nullopt;
  const std::string quoted = "'" + std::string(ids) + "': ";
  std::vector<std::string_view> seen;
  size_t position = 1;
  size_t start = 0;
  while (true) {
    size_t comma = ids.find(',', start);
    std::string_view id =
        ids.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!id.empty() && id.front() == ' ') id.remove_prefix(1);
    while (!id.empty() && id.back() == ' ') id.remove_suffix(1);
    if (id.empty()) return quoted + "empty id at position " + std::to_string(position);
    for (char c : id) {
      if (c < '0' || c > '9') {
        return quoted + "'" + std::string(id) +
               "' is not a GPU index (expected 'all' or a list like 0,1,3)";
      }
    }
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) {
      return quoted + "GPU " + std::string(id) + " is listed twice";
    }
    seen.push_back(id);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
    ++position;
  }
  return std::nullopt;
}

}  // namespace accel::config
