#include "launcher/supervise/oom.h"

#include <fstream>
#include <sstream>
#include <string>

namespace accel::launcher {
namespace {

std::optional<uint64_t> readCounter(const std::string& file) {
  std::ifstream in(file);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> readOomKillCount() {
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    // "0::/path" (v2) or "N:memory:/path" (v1)
    auto first = line.find(':');
    auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      if (auto v = readCounter("/sys/fs/cgroup" + path + "/memory.events")) return v;
      if (auto v = readCounter("/sys/fs/cgroup/unified" + path + "/memory.events")) return v;
    } else if (controllers.find("memory") != std::string::npos) {
      if (auto v = readCounter("/sys/fs/cgroup/memory" + path + "/memory.oom_control")) return v;
    }
  }
  return std::nullopt;
}

}  // namespace accel::launcher
