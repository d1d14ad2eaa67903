#include "probes/system_info.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <utility>

namespace accel::probes {
namespace {

std::string valueAfterColon(const std::string& line) {
  auto colon = line.find(':');
  if (colon == std::string::npos) return "";
  auto start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

std::string readOsName() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return "";
}

// /proc/cpuinfo's first model name (when `model` is given) and its distinct (physical id, core id)
// pairs.
void readCpuInfo(std::string* model, int* physicalCores) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::pair<std::string, std::string>> cores;
  std::string physicalId;
  while (std::getline(cpuinfo, line)) {
    if (model && model->empty() && line.rfind("model name", 0) == 0) *model = valueAfterColon(line);
    if (line.rfind("physical id", 0) == 0) physicalId = valueAfterColon(line);
    if (line.rfind("core id", 0) == 0) cores.emplace(physicalId, valueAfterColon(line));
  }
  *physicalCores = static_cast<int>(cores.size());
}

}  // namespace

int countPhysicalCores() {
  int cores = 0;
  readCpuInfo(nullptr, &cores);
  return cores;
}

SystemInfo probeSystem() {
  SystemInfo info;
  utsname u{};
  if (::uname(&u) == 0) {
    info.kernel = std::string(u.sysname) + " " + u.release + " " + u.version;
    info.machine = u.machine;
    info.hostname = u.nodename;
  }
  info.os = readOsName();
  info.logical_cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) info.usable_cpus = CPU_COUNT(&set);

  readCpuInfo(&info.cpu_model, &info.physical_cores);

  std::string line;
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      info.ram_gib = std::stod(valueAfterColon(line)) / (1024.0 * 1024.0);  // kB → GiB
      break;
    }
  }
  return info;
}

}  // namespace accel::probes
