#include "probes/health.h"

#include <sys/statvfs.h>

#include <fstream>

#include "probes/gpu_health.h"
#include "probes/net_check.h"
#include "probes/python_probe.h"
#include "probes/run_program.h"

namespace accel::probes {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Free space under `path` (for an unprivileged writer) against the least the job needs.
HealthCheck freeSpace(const std::string& name, const std::string& path, uint64_t least) {
  const auto start = Clock::now();
  HealthCheck c{name, true, "", {}};
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) {
    c.passed = false;
    c.detail = path + " cannot be read (it does not exist, or is not reachable)";
  } else {
    const uint64_t free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    c.passed = free >= least;
    c.detail = mib(free) + " free under " + path + (c.passed ? "" : ", below " + mib(least));
  }
  c.took = since(start);
  return c;
}

// The interface's link as the kernel says (operstate): "down" (or "lowerlayerdown", "dormant",
// "notpresent") fails; "up" passes, and so does "unknown" (loopback and many virtual interfaces
// report no state).
HealthCheck linkUp(const std::string& sysClassNet, const std::string& interface) {
  const auto start = Clock::now();
  HealthCheck c{"link " + interface, true, "", {}};
  std::ifstream in(sysClassNet + "/" + interface + "/operstate");
  std::string state;
  if (!(in >> state)) {
    c.passed = false;
    c.detail = "no interface " + interface + " (" + sysClassNet + ")";
  } else {
    c.passed = state == "up" || state == "unknown";
    c.detail = "operstate " + state;
  }
  c.took = since(start);
  return c;
}

// The user's command: healthy when it exits 0; its last line of output says why not.
HealthCheck userCommand(const std::string& command, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  HealthCheck c{"command", true, "", {}};
  auto run = runCaptured({"/bin/sh", "-c", "exec 2>&1\n" + command}, timeout);
  c.took = since(start);
  if (!run) {
    c.passed = false;
    c.detail = run.error();
    return c;
  }
  std::string out = run->output;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const std::string last =
      out.substr(out.find_last_of('\n') == std::string::npos ? 0 : out.find_last_of('\n') + 1);
  c.passed = run->exit_code == 0;
  c.detail = (last.empty() ? "no output" : last) + " (exit " + std::to_string(run->exit_code) + ")";
  return c;
}

// The workers' interpreter finds torch (probePython: located, not imported).
HealthCheck pythonHasTorch(const std::string& python) {
  const auto start = Clock::now();
  const PythonInfo info = probePython(python);
  HealthCheck c{"python", info.torch.has_value(), "", {}};
  if (!info.error.empty()) {
    c.detail = python + " cannot be run: " + info.error;
  } else {
    c.detail = info.torch ? "torch " + *info.torch + " (" + info.executable + ")"
                          : info.executable + " has no torch";
  }
  c.took = since(start);
  return c;
}

// One of the rendezvous's endpoints accepts a connection within a second.
HealthCheck rendezvousAnswers(const std::vector<std::pair<std::string, int>>& endpoints) {
  const auto start = Clock::now();
  HealthCheck c{"rendezvous", false, "", {}};
  for (const auto& [host, port] : endpoints) {
    auto reached = waitForListener(host, port, std::chrono::seconds(1), std::chrono::hours(1),
                                   [](const std::string&) {});
    c.passed = reached.ok();
    c.detail = reached.ok() ? host + ":" + std::to_string(port) + " answers" : reached.error();
    if (c.passed) break;
  }
  c.took = since(start);
  return c;
}

}  // namespace

std::vector<HealthCheck> runHealthChecks(const HealthSettings& s) {
  std::vector<HealthCheck> checks;
  for (const auto& dir : s.directories) {
    checks.push_back(freeSpace("disk " + dir, dir, s.min_free_bytes));
  }
  if (!s.shm.empty()) checks.push_back(freeSpace(s.shm, s.shm, s.shm_min_free_bytes));
  if (!s.interface.empty()) checks.push_back(linkUp(s.sys_class_net, s.interface));
  if (!s.python.empty()) checks.push_back(pythonHasTorch(s.python));
  if (!s.endpoints.empty()) checks.push_back(rendezvousAnswers(s.endpoints));
  if (s.gpus) {
    for (auto& gpu : s.gpus->check()) checks.push_back(std::move(gpu));
  }
  if (s.command) checks.push_back(userCommand(*s.command, s.command_timeout));
  return checks;
}

std::optional<std::string> firstFailure(const std::vector<HealthCheck>& checks) {
  for (const auto& c : checks) {
    if (c.passed) continue;
    return c.name + " failed: " + c.detail;
  }
  return std::nullopt;
}

}  // namespace accel::probes
