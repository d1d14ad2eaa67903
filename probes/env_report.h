#pragma once
// `accel env`: everything a bug report needs about this machine, this build and the config,
// as text (like `accelerate env`) or JSON.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/paths.h"
#include "probes/gpu_probe.h"
#include "probes/python_probe.h"
#include "probes/scheduler_env.h"
#include "probes/system_info.h"

namespace accel::probes {

// Facts fixed when accel was built (filled from CMake by the caller).
struct BuildInfo {
  std::string version;        // "0.1.0"
  std::string git_revision;   // short hash or "unknown"
  std::string compiler;       // "GCC 12.2.0"
  std::string build_type;     // "RelWithDebInfo"
  std::string torch_version;  // LibTorch found at build time
  bool with_nccl = false;     // CUDA + NCCL were found at build time
};

struct ConfigSection {
  std::optional<std::string> path;  // the file in use; nullopt = none found
  bool explicit_path = false;       // given with --config_file
  nlohmann::json values;            // the file's keys and values (null when none)
  std::string error;                // load error, "" when fine
};

struct EnvReport {
  BuildInfo build;
  std::string accel_path;  // the running binary
  SystemInfo system;
  GpuInfo gpus;
  std::vector<PythonInfo> pythons;
  ConfigSection config;
  std::optional<SchedulerInfo> scheduler;  // SLURM/MPI as this process sees it
  std::string scheduler_error;             // its variables are malformed ("" when fine)
};

// Collects the report (the scheduler from `environ`). `configFile` is --config_file if given.
// Finishes in well under a second on a machine without GPUs (the slowest part is one python3
// start).
EnvReport collectEnvReport(const BuildInfo& build, const std::optional<std::string>& configFile,
                           const config::PathEnv& env);

std::string renderEnvText(const EnvReport& report);
nlohmann::json renderEnvJson(const EnvReport& report);

}  // namespace accel::probes
