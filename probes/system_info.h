#pragma once
// Facts about this machine read from the kernel (uname, /proc), without spawning anything.

#include <string>

namespace accel::probes {

struct SystemInfo {
  std::string os;       // PRETTY_NAME from /etc/os-release, e.g. "Debian GNU/Linux 12 (bookworm)"
  std::string kernel;   // "Linux 6.1.0-... #1 SMP ..."
  std::string machine;  // "x86_64"
  std::string hostname;
  std::string cpu_model;   // first "model name" in /proc/cpuinfo
  int logical_cpus = 0;    // online CPUs
  int usable_cpus = 0;     // CPUs in this process's affinity mask
  int physical_cores = 0;  // distinct (physical id, core id) pairs; 0 when unknown
  double ram_gib = 0;      // MemTotal
};

// Reads the facts above; fields that cannot be read stay empty/zero. Never throws; fast.
SystemInfo probeSystem();

// SystemInfo::physical_cores alone (reads /proc/cpuinfo only); 0 when unknown. Never throws.
int countPhysicalCores();

}  // namespace accel::probes
