#include "probes/env_report.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <future>
#include <sstream>

#include "config/config_file.h"
#include "probes/run_program.h"

namespace accel::probes {
namespace {

using nlohmann::json;

std::string selfPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string gib(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", value);
  return buf;
}

// Python's str() of a config value, as `accelerate env` prints it.
std::string pythonStr(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && v.empty()) return "[]";
  return v.dump();
}

}  // namespace

EnvReport collectEnvReport(const BuildInfo& build, const std::optional<std::string>& configFile,
                           const config::PathEnv& env) {
  EnvReport report;
  report.build = build;
  report.accel_path = selfPath();

  // Python start-up is the slow part: run the probes while the rest is read.
  std::vector<std::string> pythons{defaultPython()};
  std::string primary = findInPath(pythons[0]);
  if (primary != "/usr/bin/python3" && ::access("/usr/bin/python3", X_OK) == 0)
    pythons.push_back("/usr/bin/python3");
  std::vector<std::future<PythonInfo>> probes;
  for (const auto& p : pythons)
    probes.push_back(std::async(std::launch::async, probePythonAndBlas, p));

  report.system = probeSystem();
  report.gpus = probeGpus();
  if (auto scheduler = detectScheduler(processEnvironment())) {
    report.scheduler = *scheduler;
  } else {
    report.scheduler_error = scheduler.error();
  }

  auto path = config::resolveConfigPath(configFile, env);
  report.config.explicit_path = configFile.has_value();
  if (!path) {
    report.config.error = path.error();
  } else if (*path) {
    report.config.path = **path;
    auto loaded = config::loadConfig(**path);
    if (loaded) {
      report.config.values = json(loaded->toDocument());
    } else {
      report.config.error = loaded.error();
    }
  }
  for (auto& f : probes) report.pythons.push_back(f.get());
  return report;
}

std::string renderEnvText(const EnvReport& r) {
  std::ostringstream out;
  out << "\nCopy-and-paste the text below in your GitHub issue\n\n";
  out << "- `accel` version: " << r.build.version << " (git " << r.build.git_revision << ", "
      << r.build.build_type << ")\n";
  out << "- `accel` location: " << r.accel_path << "\n";
  out << "- Compiler: " << r.build.compiler << "\n";
  out << "- Platform: " << r.system.os << " (" << r.system.kernel << ", " << r.system.machine
      << ")\n";
  out << "- Hostname: " << r.system.hostname << "\n";
  out << "- CPU: " << (r.system.cpu_model.empty() ? "unknown" : r.system.cpu_model) << "; "
      << r.system.logical_cpus << " logical CPUs (" << r.system.usable_cpus
      << " usable by this process), " << r.system.physical_cores << " physical cores\n";
  out << "- System RAM: " << gib(r.system.ram_gib) << "\n";
  out << "- LibTorch version (built against): " << r.build.torch_version << "\n";
  out << "- CUDA usable: " << (r.gpus.cuda_usable ? "yes" : "no (" + r.gpus.cuda_status + ")")
      << "\n";
  if (r.gpus.driver_cuda_version) {
    out << "- CUDA driver API version: " << cudaVersionString(*r.gpus.driver_cuda_version) << "\n";
  }
  if (r.gpus.driver_version) out << "- NVIDIA driver version: " << *r.gpus.driver_version << "\n";
  out << "- GPU count: " << r.gpus.devices.size() << "\n";
  for (const auto& d : r.gpus.devices) {
    out << "- GPU " << d.index << ": " << d.name << ", "
        << gib(static_cast<double>(d.memory_bytes) / (1ull << 30)) << "\n";
  }
  // Two facts that are easily confused: the NCCL this machine would load now (torch's workers
  // may bring their own), and whether libaccel's C++ workers were built to use NCCL at all.
  out << "- NCCL on this machine (libnccl.so.2, loaded at run time): "
      << (r.gpus.nccl_version ? *r.gpus.nccl_version : "not found (" + r.gpus.nccl_status + ")")
      << "\n";
  out << "- NCCL in libaccel (C++ workers): "
      << (r.build.with_nccl ? "built in: GPU ranks all-reduce with NCCL"
                            : "not built in (no NCCL at build time): C++ workers communicate "
                              "through the CPU (Gloo or shared memory); torch's own NCCL is "
                              "unaffected")
      << "\n";
  for (const auto& p : r.pythons) {
    out << "- Python (" << p.command << "): ";
    if (!p.error.empty()) {
      out << "unavailable (" << p.error << ")\n";
      continue;
    }
    out << p.version << " at " << p.executable << ", torch "
        << (p.torch ? *p.torch : "not installed") << "\n";
    if (p.blas) {
      out << "- BLAS under torch (" << p.command << "): " << describeBlas(*p.blas);
      if (p.blas->slow()) out << "; fix: " << kBlasFix;
      out << "\n";
    }
  }
  out << "- Scheduler: ";
  if (!r.scheduler_error.empty()) {
    out << "malformed (" << r.scheduler_error << ")\n";
  } else if (!r.scheduler) {
    out << "none (a static launch)\n";
  } else {
    const SchedulerInfo& s = *r.scheduler;
    out << s.name << (s.job_id ? " job " + *s.job_id : "") << ": node " << s.node_rank << " of "
        << s.num_nodes;
    if (!s.hosts.empty()) out << " (master " << s.hosts.front() << ")";
    out << ", task " << s.task_rank << " of " << s.num_tasks << " (local " << s.local_task_rank
        << " of " << s.local_num_tasks << ")";
    if (s.gpus_on_node) out << ", " << *s.gpus_on_node << " GPU(s)";
    if (s.cpus_on_node) out << ", " << *s.cpus_on_node << " CPU(s) on this node";
    out << "\n";
  }
  out << (r.config.explicit_path ? "- `accel` config passed:" : "- `accel` default config:");
  if (r.config.path) out << " " << *r.config.path;
  out << "\n";
  if (!r.config.error.empty()) {
    out << "\tError: " << r.config.error << "\n";
  } else if (!r.config.path) {
    out << "\tNot found\n";
  } else {
    for (const auto& [key, value] : r.config.values.items())
      out << "\t- " << key << ": " << pythonStr(value) << "\n";
  }
  return out.str();
}

json renderEnvJson(const EnvReport& r) {
  json devices = json::array();
  for (const auto& d : r.gpus.devices) {
    devices.push_back({{"index", d.index}, {"name", d.name}, {"memory_bytes", d.memory_bytes}});
  }
  json pythons = json::array();
  for (const auto& p : r.pythons) {
    json entry = {{"command", p.command},
                  {"executable", p.executable},
                  {"version", p.version},
                  {"torch", p.torch ? json(*p.torch) : json(nullptr)}};
    if (!p.error.empty()) entry["error"] = p.error;
    if (p.blas) {
      entry["blas"] = {{"kind", p.blas->kind.empty() ? json(nullptr) : json(p.blas->kind)},
                       {"library", p.blas->library}};
      if (!p.blas->error.empty()) entry["blas"]["error"] = p.blas->error;
    }
    pythons.push_back(entry);
  }
  auto optional = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  json scheduler = nullptr;
  if (!r.scheduler_error.empty()) {
    scheduler = {{"error", r.scheduler_error}};
  } else if (r.scheduler) {
    const SchedulerInfo& s = *r.scheduler;
    scheduler = {{"name", s.name},
                 {"job_id", optional(s.job_id)},
                 {"hosts", s.hosts},
                 {"num_nodes", s.num_nodes},
                 {"node_rank", s.node_rank},
                 {"num_tasks", s.num_tasks},
                 {"task_rank", s.task_rank},
                 {"local_task_rank", s.local_task_rank},
                 {"local_num_tasks", s.local_num_tasks},
                 {"gpus_on_node", optional(s.gpus_on_node)},
                 {"cpus_on_node", optional(s.cpus_on_node)}};
  }
  return json{
      {"accel",
       {{"version", r.build.version},
        {"git_revision", r.build.git_revision},
        {"build_type", r.build.build_type},
        {"compiler", r.build.compiler},
        {"path", r.accel_path},
        {"nccl_at_build", r.build.with_nccl}}},
      {"platform",
       {{"os", r.system.os},
        {"kernel", r.system.kernel},
        {"machine", r.system.machine},
        {"hostname", r.system.hostname}}},
      {"cpu",
       {{"model", r.system.cpu_model},
        {"logical_cpus", r.system.logical_cpus},
        {"usable_cpus", r.system.usable_cpus},
        {"physical_cores", r.system.physical_cores}}},
      {"ram_gib", r.system.ram_gib},
      {"libtorch", {{"version", r.build.torch_version}}},
      {"cuda",
       {{"usable", r.gpus.cuda_usable},
        {"status", r.gpus.cuda_status},
        {"driver_cuda_version", optional(r.gpus.driver_cuda_version)},
        {"driver_version", optional(r.gpus.driver_version)},
        {"gpu_count", r.gpus.devices.size()},
        {"devices", devices}}},
      {"nccl", {{"version", optional(r.gpus.nccl_version)}, {"status", r.gpus.nccl_status}}},
      {"python", pythons},
      {"scheduler", scheduler},
      {"config",
       {{"path", optional(r.config.path)},
        {"explicit", r.config.explicit_path},
        {"values", r.config.values},
        {"error", r.config.error.empty() ? json(nullptr) : json(r.config.error)}}},
  };
}

}  // namespace accel::probes
