#pragma once
// A process environment as KEY=VALUE strings: the parent's, which the plan, the scheduler
// detection and the workers' environments are computed from (pure functions of it).

#include <optional>
#include <string>
#include <vector>

namespace accel::probes {

using Environment = std::vector<std::string>;

// Value of `key` in `env`, or nullopt.
std::optional<std::string> lookup(const Environment& env, const std::string& key);

// This process's environment (`environ`).
Environment processEnvironment();

}  // namespace accel::probes
