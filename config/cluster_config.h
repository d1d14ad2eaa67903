#pragma once
// ClusterConfig: the contents of accelerate's `default_config.yaml`, typed for the keys accel
// interprets, with every other accepted key carried through untouched so a file survives a
// load/save round trip.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/schema.h"

namespace accel::config {

// A config as a flat map of top-level key → value, the shape of the file itself. Keys are
// sorted (as accelerate's writer sorts them); null values mean "absent" and are never stored.
using Document = std::map<std::string, nlohmann::json>;

struct ClusterConfig {
  std::string compute_environment{kLocalMachine};
  std::string distributed_type{kDistributedNo};
  std::string mixed_precision = "no";
  bool use_cpu = false;
  bool debug = false;
  int num_processes = -1;  // the total over all machines; -1 = not given (as in accelerate)
  int num_machines = 1;
  int machine_rank = 0;
  std::optional<std::string> gpu_ids;  // "all" or "0,1,3"
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  std::string rdzv_backend = "static";
  bool same_network = false;
  std::string main_training_function = "main";
  bool enable_cpu_affinity = false;
  // Accepted keys accel does not interpret (downcast_bf16, tpu_*, commands, *_config sections).
  Document extras;

  // Every key: typed fields plus extras; unset optionals and empty mappings are dropped, as
  // accelerate's `to_dict` drops None. What `config show` prints.
  Document toDocument() const;

  // What accel writes to a file: toDocument() less what would stop an accelerate from 0.27 on
  // from loading it. Keys an older accelerate rejects (enable_cpu_affinity; fp8_config,
  // parallelism_config and mpirun_config are mappings, dropped when empty) appear only when
  // they differ from their default. mixed_precision 'no' is left out when DeepSpeed reads its
  // own JSON file, as accelerate's questionnaire does (its launch refuses a mixed_precision
  // from the config file beside deepspeed_config_file).
  Document toFileDocument() const;

  // Builds a config from a document whose values already passed schema validation
  // (see loadConfig). Keys not in the typed fields go to `extras`. A typed field holding a value
  // of the wrong kind (a document that skipped validation) throws nlohmann::json::type_error.
  static ClusterConfig fromDocument(const Document& doc);

  bool operator==(const ClusterConfig& other) const { return toDocument() == other.toDocument(); }
};

// The keys accelerate's interactive `config` writes for a local machine beyond the typed fields
// (downcast_bf16: 'no', tpu_env: [], tpu_use_cluster/tpu_use_sudo: false), so files we write
// look like theirs.
void addAccelerateDefaults(ClusterConfig& config);

// What `config update` removes so that every accelerate from 0.27 on loads the result: keys no
// longer accepted by accelerate 1.x (ipex_config, dropped with IPEX support in 1.0). Returns one
// line per key removed, naming it and why, for the user.
std::vector<std::string> dropObsoleteKeys(ClusterConfig& config);

// accelerate's `process_config` migrations, applied to a freshly read document in place:
// legacy `fp16: true` → mixed_precision fp16; top-level dynamo_backend → dynamo_config;
// missing compute_environment → LOCAL_MACHINE; NO without num_processes → 1.
void migrateDocument(Document& doc);

// The distributed types that run on GPUs: MULTI_GPU, FSDP, DEEPSPEED, MEGATRON_LM.
bool isGpuDistributedType(const std::string& type);

// The one rule for mixed precision without a GPU, used by config, launch and env --check alike:
// fp16 and fp8 need one (accel does not fake fp16 in fp32 on a CPU, as accelerate silently
// does); bf16 and no run anywhere.
bool precisionNeedsGpu(const std::string& mixedPrecision);

}  // namespace accel::config
