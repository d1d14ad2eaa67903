#pragma once
// The kernel's count of OOM kills in this process's memory cgroup, to tell a worker killed by
// the OOM killer from one killed by someone else.

#include <cstdint>
#include <optional>

namespace accel::launcher {

// memory.events' oom_kill (cgroup v2) or memory.oom_control's oom_kill (v1) for the cgroup
// this process is in; nullopt when neither can be read.
std::optional<uint64_t> readOomKillCount();

}  // namespace accel::launcher
