#pragma once
// What `accel launch --dry_run` prints: each rank this machine would start, its command, CPUs
// and the variables accel sets, without starting anything.

#include <string>

#include "launcher/plan/launch_plan.h"

namespace accel::launcher {

// The dry run as text: the plan's notices, the command, the variables every rank shares, then
// one line per rank with its CPUs and the variables of its own.
std::string renderDryRun(const LaunchPlan& plan);

// The dry run as one JSON object (--dry_run_json): {"ranks": [{"rank", "local_rank",
// "command", "env"}], "notices", "world_size", "num_machines", "machine_rank"}.
std::string renderDryRunJson(const LaunchPlan& plan);

}  // namespace accel::launcher
