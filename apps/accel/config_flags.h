#pragma once
// The flags that override config-file values, spelled as in `accelerate launch` (both
// `--num_processes` and `--num-processes`). Shared by `accel config show` and `accel launch`.

#include <CLI/CLI.hpp>

#include "config/effective_config.h"

namespace accel::apps {

// Binds --config_file, --cpu, --multi_gpu, -n/--num_processes, --num_machines, --machine_rank,
// --main_process_ip, --main_process_port, --mixed_precision, --gpu_ids, --rdzv_backend,
// --same_network and --debug into `overrides`.
void addConfigOverrideFlags(CLI::App& command, config::ConfigOverrides& overrides);

}  // namespace accel::apps
