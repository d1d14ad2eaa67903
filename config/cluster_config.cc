#include "config/cluster_config.h"

namespace accel::config {
namespace {

template <typename T>
void take(const Document& doc, const char* key, T& field) {
  auto it = doc.find(key);
  if (it != doc.end() && !it->second.is_null()) field = it->second.get<T>();
}

template <typename T>
void take(const Document& doc, const char* key, std::optional<T>& field) {
  auto it = doc.find(key);
  if (it != doc.end() && !it->second.is_null()) field = it->second.get<T>();
}

bool isTypedKey(const std::string& key) {
  static const char* const kTyped[] = {"compute_environment",
                                       "distributed_type",
                                       "mixed_precision",
                                       "use_cpu",
                                       "debug",
                                       "num_processes",
                                       "num_machines",
                                       "machine_rank",
                                       "gpu_ids",
                                       "main_process_ip",
                                       "main_process_port",
                                       "rdzv_backend",
                                       "same_network",
                                       "main_training_function",
                                       "enable_cpu_affinity"};
  for (const char* k : kTyped) {
    if (key == k) return true;
  }
  return false;
}

bool usesDeepSpeedConfigFile(const ClusterConfig& c) {
  auto it = c.extras.find("deepspeed_config");
  return c.distributed_type == kDistributedDeepSpeed && it != c.extras.end() &&
         it->second.is_object() && it->second.contains("deepspeed_config_file");
}

}  // namespace

Document ClusterConfig::toDocument() const {
  Document doc;
  for (const auto& [key, value] : extras) {
    if (value.is_null() || (value.is_object() && value.empty())) continue;
    doc[key] = value;
  }
  doc["compute_environment"] = compute_environment;
  doc["distributed_type"] = distributed_type;
  doc["mixed_precision"] = mixed_precision;
  doc["use_cpu"] = use_cpu;
  doc["debug"] = debug;
  doc["num_processes"] = num_processes;
  doc["num_machines"] = num_machines;
  doc["machine_rank"] = machine_rank;
  if (gpu_ids) doc["gpu_ids"] = *gpu_ids;
  if (main_process_ip) doc["main_process_ip"] = *main_process_ip;
  if (main_process_port) doc["main_process_port"] = *main_process_port;
  doc["rdzv_backend"] = rdzv_backend;
  doc["same_network"] = same_network;
  doc["main_training_function"] = main_training_function;
  doc["enable_cpu_affinity"] = enable_cpu_affinity;
  return doc;
}

Document ClusterConfig::toFileDocument() const {
  Document doc = toDocument();
  if (!enable_cpu_affinity) doc.erase("enable_cpu_affinity");  // accelerate 0.27 rejects the key
  if (mixed_precision == "no" && usesDeepSpeedConfigFile(*this)) doc.erase("mixed_precision");
  return doc;
}

ClusterConfig ClusterConfig::fromDocument(const Document& doc) {
  ClusterConfig c;
  take(doc, "compute_environment", c.compute_environment);
  take(doc, "distributed_type", c.distributed_type);
  take(doc, "mixed_precision", c.mixed_precision);
  take(doc, "use_cpu", c.use_cpu);
  take(doc, "debug", c.debug);
  take(doc, "num_processes", c.num_processes);
  take(doc, "num_machines", c.num_machines);
  take(doc, "machine_rank", c.machine_rank);
  take(doc, "gpu_ids", c.gpu_ids);
  take(doc, "main_process_ip", c.main_process_ip);
  take(doc, "main_process_port", c.main_process_port);
  take(doc, "rdzv_backend", c.rdzv_backend);
  take(doc, "same_network", c.same_network);
  take(doc, "main_training_function", c.main_training_function);
  take(doc, "enable_cpu_affinity", c.enable_cpu_affinity);
  for (const auto& [key, value] : doc) {
    if (!isTypedKey(key) && !value.is_null()) c.extras[key] = value;
  }
  return c;
}

void addAccelerateDefaults(ClusterConfig& config) {
  config.extras.emplace("downcast_bf16", "no");
  config.extras.emplace("tpu_env", nlohmann::json::array());
  config.extras.emplace("tpu_use_cluster", false);
  config.extras.emplace("tpu_use_sudo", false);
}

std::vector<std::string> dropObsoleteKeys(ClusterConfig& config) {
  std::vector<std::string> dropped;
  if (config.extras.erase("ipex_config")) {
    dropped.push_back(
        "removed 'ipex_config': accelerate 1.x rejects it (its IPEX options are gone since 1.0)");
  }
  return dropped;
}

void migrateDocument(Document& doc) {
  if (!doc.count("compute_environment")) doc["compute_environment"] = std::string(kLocalMachine);
  if (auto it = doc.find("fp16"); it != doc.end()) {
    if (it->second.is_boolean() && it->second.get<bool>())
      doc["mixed_precision"] = "fp16";
    else if (!doc.count("mixed_precision"))
      doc["mixed_precision"] = "no";
    doc.erase("fp16");
  }
  if (auto it = doc.find("dynamo_backend"); it != doc.end()) {
    std::string backend = it->second.is_string() ? it->second.get<std::string>() : "NO";
    doc.erase(it);
    if (backend != "NO" && backend != "no") {
      doc["dynamo_config"] = nlohmann::json{{"dynamo_backend", backend}};
    }
  }
  auto type = doc.find("distributed_type");
  if (type != doc.end() && type->second == kDistributedNo && !doc.count("num_processes")) {
    doc["num_processes"] = 1;
  }
}

bool isGpuDistributedType(const std::string& type) {
  return type == kDistributedMultiGpu || type == kDistributedFsdp ||
         type == kDistributedDeepSpeed || type == kDistributedMegatronLm;
}

bool precisionNeedsGpu(const std::string& mixedPrecision) {
  return mixedPrecision == "fp16" || mixedPrecision == "fp8";
}

}  // namespace accel::config
