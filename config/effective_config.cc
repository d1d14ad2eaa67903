#include "config/effective_config.h"

#include <set>

#include "config/config_file.h"

namespace accel::config {
namespace {

Expected<void> checkChoice(const char* flag, const std::string& value, const FieldSpec& spec) {
  for (auto choice : spec.choices) {
    if (choice == value) return {};
  }
  return makeError(std::string(flag) + ": '" + value + "' is not one of " +
                   joinChoices(spec.choices));
}

Expected<void> checkRange(const char* flag, int value, int min, int max) {
  if (value >= min && value <= max) return {};
  return makeError(std::string(flag) + ": " + std::to_string(value) + " is out of range " +
                   std::to_string(min) + ".." + std::to_string(max));
}

}  // namespace

std::string origin(const EffectiveConfig& e, const char* key, const char* flag) {
  auto it = e.sources.find(key);
  if (it == e.sources.end()) return "default";
  switch (it->second) {
    case Source::Flag:
      return flag;
    case Source::File:
      return std::string("'") + key + "' in " + e.file.value_or("the config file");
    case Source::Default:
      return "the default";
  }
  return "";
}

const char* sourceName(Source source) {
  switch (source) {
    case Source::Default:
      return "default";
    case Source::File:
      return "file";
    case Source::Flag:
      return "flag";
  }
  return "?";
}

ClusterConfig builtinDefaults() {
  ClusterConfig c;
  c.num_processes = 1;
  return c;
}

namespace {

// A field set by a flag, and where it came from.
template <typename Field, typename Value>
void setFromFlag(EffectiveConfig& e, const char* key, Field& field, const Value& value) {
  field = value;
  e.sources[key] = Source::Flag;
}

// The machines and the store's address: counts in range, the address not empty.
Expected<void> applyMachineFlags(EffectiveConfig& e, const ConfigOverrides& f) {
  ClusterConfig& c = e.config;
  if (f.num_processes) {
    if (auto ok = checkRange("--num_processes", *f.num_processes, 1, 1 << 20); !ok) return ok;
    setFromFlag(e, "num_processes", c.num_processes, *f.num_processes);
  }
  if (f.num_machines) {
    if (auto ok = checkRange("--num_machines", *f.num_machines, 1, 1 << 20); !ok) return ok;
    setFromFlag(e, "num_machines", c.num_machines, *f.num_machines);
  }
  if (f.machine_rank) {
    if (auto ok = checkRange("--machine_rank", *f.machine_rank, 0, 1 << 20); !ok) return ok;
    setFromFlag(e, "machine_rank", c.machine_rank, *f.machine_rank);
  }
  if (f.main_process_ip) {
    if (f.main_process_ip->empty()) return makeError("--main_process_ip: must not be empty");
    setFromFlag(e, "main_process_ip", c.main_process_ip, f.main_process_ip);
  }
  if (f.main_process_port) {
    if (auto ok = checkRange("--main_process_port", *f.main_process_port, 0, 65535); !ok) {
      return ok;
    }
    setFromFlag(e, "main_process_port", c.main_process_port, f.main_process_port);
  }
  return {};
}

// Settings with a set of allowed values, and the switches.
Expected<void> applyChoiceFlags(EffectiveConfig& e, const ConfigOverrides& f) {
  ClusterConfig& c = e.config;
  if (f.mixed_precision) {
    if (auto ok =
            checkChoice("--mixed_precision", *f.mixed_precision, *findField("mixed_precision"));
        !ok) {
      return ok;
    }
    setFromFlag(e, "mixed_precision", c.mixed_precision, *f.mixed_precision);
  }
  if (f.gpu_ids) {
    if (auto problem = checkGpuIds(*f.gpu_ids)) return makeError("--gpu_ids: " + *problem);
    setFromFlag(e, "gpu_ids", c.gpu_ids, f.gpu_ids);
  }
  if (f.rdzv_backend) {
    if (auto ok = checkChoice("--rdzv_backend", *f.rdzv_backend, *findField("rdzv_backend")); !ok) {
      return ok;
    }
    setFromFlag(e, "rdzv_backend", c.rdzv_backend, *f.rdzv_backend);
  }
  if (f.same_network) setFromFlag(e, "same_network", c.same_network, *f.same_network);
  if (f.debug) setFromFlag(e, "debug", c.debug, true);
  if (f.enable_cpu_affinity) setFromFlag(e, "enable_cpu_affinity", c.enable_cpu_affinity, true);
  return {};
}

// --cpu, --multi_gpu and the paradigm flags (--use_fsdp ...): the distributed type.
void applyDeviceFlags(EffectiveConfig& e, const ConfigOverrides& f) {
  ClusterConfig& c = e.config;
  if (f.cpu) {
    // CPU only: several processes are MULTI_CPU, one is NO, whatever the file said.
    setFromFlag(e, "use_cpu", c.use_cpu, true);
    std::string type(c.num_processes > 1 ? kDistributedMultiCpu : kDistributedNo);
    if (c.distributed_type != type) setFromFlag(e, "distributed_type", c.distributed_type, type);
  }
  if (f.multi_gpu || f.distributed_type) {
    setFromFlag(e, "distributed_type", c.distributed_type,
                f.distributed_type.value_or(std::string(kDistributedMultiGpu)));
    setFromFlag(e, "use_cpu", c.use_cpu, false);
  }
}

// The machine rank and process count against the machines, each named with its origin.
Expected<void> checkMachineCounts(const EffectiveConfig& e) {
  const ClusterConfig& c = e.config;
  if (c.machine_rank >= c.num_machines) {
    return makeError("machine_rank " + std::to_string(c.machine_rank) + " (from " +
                     origin(e, "machine_rank", "--machine_rank") + ") must be below num_machines " +
                     std::to_string(c.num_machines) + " (from " +
                     origin(e, "num_machines", "--num_machines") + ")");
  }
  if (c.num_processes > 0 && c.num_processes < c.num_machines) {
    return makeError("num_processes " + std::to_string(c.num_processes) + " (from " +
                     origin(e, "num_processes", "--num_processes") +
                     ") is the total over all machines and must be at least num_machines " +
                     std::to_string(c.num_machines) + " (from " +
                     origin(e, "num_machines", "--num_machines") + ")");
  }
  return {};
}

}  // namespace

Expected<EffectiveConfig> applyOverrides(EffectiveConfig e, const ConfigOverrides& f) {
  if (f.cpu && (f.multi_gpu || f.distributed_type)) {
    return makeError(std::string("--cpu and --") +
                     (f.multi_gpu ? "multi_gpu" : "use_" + *f.distributed_type) +
                     " cannot be used together");
  }
  if (auto ok = applyMachineFlags(e, f); !ok) return std::move(ok).takeError();
  if (auto ok = applyChoiceFlags(e, f); !ok) return std::move(ok).takeError();
  applyDeviceFlags(e, f);
  if (auto ok = checkMachineCounts(e); !ok) return std::move(ok).takeError();
  for (const auto& entry : e.config.toDocument()) e.sources.emplace(entry.first, Source::Default);
  return e;
}

Expected<EffectiveConfig> resolveEffectiveConfig(const ConfigOverrides& flags, const PathEnv& env) {
  auto path = resolveConfigPath(flags.config_file, env);
  if (!path) return std::move(path).takeError();
  EffectiveConfig base;
  base.config = builtinDefaults();
  if (*path) {
    std::set<std::string> keys;
    auto loaded = loadConfig(**path, &keys);
    if (!loaded) return std::move(loaded).takeError();
    base.config = std::move(*loaded);
    if (base.config.num_processes == -1) {
      // The file leaves the count open (accelerate would demand --num_processes): the flag or
      // the built-in default of 1 decides.
      base.config.num_processes = builtinDefaults().num_processes;
      keys.erase("num_processes");
    }
    base.file = **path;
    for (const auto& key : keys) base.sources[key] = Source::File;
  }
  return applyOverrides(std::move(base), flags);
}

}  // namespace accel::config
