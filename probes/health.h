#pragma once
// A machine's health before it meets the others for a round (issue 53): the checks that apply
// here — free space under the directories the job writes (--log_dir, --health_check_dirs),
// /dev/shm, the link of the interface that reaches the other machines, the GPUs (gpu_health.h), and
// the user's own
// `--health_check CMD` (exit 0: healthy; its last line of output: the reason; killed past its
// timeout) — each with its result and how long it took.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accel::probes {

class GpuHealth;  // gpu_health.h

struct HealthSettings {
  std::vector<std::string> directories;  // each must have min_free_bytes free (--log_dir)
  uint64_t min_free_bytes = 64ull << 20;
  // Must exist with shm_min_free_bytes free ("": not checked): a container's default /dev/shm
  // is 64 MiB in all, so only a full one fails.
  std::string shm = "/dev/shm";
  uint64_t shm_min_free_bytes = 1ull << 20;
  // The interface that reaches the other machines: its link must not be down
  // (/sys/class/net/IFACE/operstate; "": not checked).
  std::string interface;
  std::string sys_class_net = "/sys/class/net";
  // The interpreter the workers run with ("": not Python): it must find torch (located, not
  // imported: importing costs about a second).
  std::string python;
  // The rendezvous's endpoints (HOST, PORT): one of them must accept a connection within a second
  // (none: not checked — this machine hosts the rendezvous).
  std::vector<std::pair<std::string, int>> endpoints;
  std::optional<std::string> command;  // --health_check: run with /bin/sh -c
  std::chrono::milliseconds command_timeout{60000};
  // The GPUs' checks through NVML (gpu_health.h), kept from round to round (XIDs since the last
  // round); nullptr: none.
  std::shared_ptr<GpuHealth> gpus;
};

struct HealthCheck {
  std::string name;  // "disk /var/log/run", "/dev/shm", "link eth0", "command"
  bool passed = true;
  std::string detail;  // why it failed (or what it saw)
  std::chrono::milliseconds took{0};
};

// Runs every check of `settings` in turn, on the calling thread (the command's at most
// command_timeout; the rest take microseconds). Never throws.
std::vector<HealthCheck> runHealthChecks(const HealthSettings& settings);

// The first failed check as a line ("command failed: <its last line> (exit 3)"), nullopt when
// every check passed.
std::optional<std::string> firstFailure(const std::vector<HealthCheck>& checks);

}  // namespace accel::probes
