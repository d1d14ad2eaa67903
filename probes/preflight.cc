#include "probes/preflight.h"

#include <netdb.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <sstream>

#include "config/config_file.h"
#include "config/schema.h"

namespace accel::probes {
namespace {

CheckItem ok(const std::string& name, std::string finding) {
  return {name, CheckStatus::Ok, std::move(finding), ""};
}
CheckItem warn(const std::string& name, std::string finding, std::string fix) {
  return {name, CheckStatus::Warn, std::move(finding), std::move(fix)};
}
CheckItem fail(const std::string& name, std::string finding, std::string fix) {
  return {name, CheckStatus::Fail, std::move(finding), std::move(fix)};
}

// Items that judge the config cannot say anything when it did not load; the config item FAILs.
std::optional<CheckItem> configMissing(const std::string& name, const ConfigFacts& facts) {
  if (facts.config) return std::nullopt;
  return warn(name, "not checked: the config file did not load",
              "fix the config file first (see the config item)");
}

std::string where(const ConfigFacts& facts) {
  return facts.path ? " (" + *facts.path + ")" : " (no config file)";
}

bool isGpuJob(const config::ClusterConfig& c) {
  return !c.use_cpu && config::isGpuDistributedType(c.distributed_type);
}

int worldSize(const config::ClusterConfig& c) { return std::max(c.num_processes, 1); }
int localWorldSize(const config::ClusterConfig& c) {
  return std::max(worldSize(c) / std::max(c.num_machines, 1), 1);
}

std::string plural(int n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : what.back() == 's' ? "es" : "s");
}

// gpu_ids "0,1,3" → {0,1,3}; an entry that is not a number is kept as -1 (named by the caller).
std::vector<std::pair<std::string, int>> parseGpuIds(const std::string& ids) {
  std::vector<std::pair<std::string, int>> out;
  std::stringstream in(ids);
  std::string id;
  while (std::getline(in, id, ',')) {
    id.erase(0, id.find_first_not_of(" \t"));
    id.erase(id.find_last_not_of(" \t") + 1);
    const bool digits =
        !id.empty() && id.size() < 6 && std::all_of(id.begin(), id.end(), ::isdigit);
    out.emplace_back(id, digits ? std::stoi(id) : -1);
  }
  return out;
}

}  // namespace

const char* statusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::Ok:
      return "OK";
    case CheckStatus::Warn:
      return "WARN";
    case CheckStatus::Fail:
      return "FAIL";
  }
  return "?";
}

CheckItem checkConfigFile(const ConfigFacts& facts) {
  if (!facts.error.empty()) {
    return fail(
        "config", facts.error,
        "correct the file (`accel config` rewrites it; `accel config update` migrates an old one)");
  }
  if (!facts.path)
    return ok("config",
              "no config file at " + facts.default_path + ": launch uses its defaults and flags");
  const config::ClusterConfig& c = *facts.config;
  return ok("config", *facts.path + " loads: " + c.distributed_type + ", " +
                          plural(worldSize(c), "process") + " on " +
                          plural(c.num_machines, "machine"));
}

CheckItem checkGpus(const ConfigFacts& facts, const GpuInfo& gpus) {
  if (auto missing = configMissing("gpus", facts)) return *missing;
  const config::ClusterConfig& c = *facts.config;
  const int found = static_cast<int>(gpus.devices.size());
  if (!isGpuJob(c)) {
    if (config::precisionNeedsGpu(c.mixed_precision) && (found == 0 || c.use_cpu)) {
      return fail("gpus",
                  "mixed_precision " + c.mixed_precision + " needs a GPU" +
                      (c.use_cpu ? " but the config is CPU-only (use_cpu)"
                                 : " and none is usable here (" + gpus.cuda_status + ")"),
                  "set mixed_precision to bf16 or no");
    }
    return ok("gpus", "CPU job (" + plural(localWorldSize(c), "process") + " here); " +
                          plural(found, "GPU") + " found");
  }
  const int local = localWorldSize(c);
  std::vector<std::string> problems;
  int allowed = found;
  if (c.gpu_ids && *c.gpu_ids != "all") {
    auto ids = parseGpuIds(*c.gpu_ids);
    allowed = std::min(found, static_cast<int>(ids.size()));
    for (const auto& [text, id] : ids) {
      if (id < 0)
        problems.push_back("gpu_ids entry '" + text + "' is not a GPU index");
      else if (id >= found)
        problems.push_back("gpu_ids names GPU " + text + ", which does not exist here (" +
                           plural(found, "GPU") + ")");
    }
  }
  if (found == 0) {
    problems.insert(problems.begin(),
                    "distributed_type " + c.distributed_type + " with " + plural(local, "process") +
                        " on this machine, but 0 GPUs are usable (" + gpus.cuda_status + ")");
  } else if (local > allowed) {
    problems.insert(problems.begin(),
                    plural(local, "process") + " on this machine but " + plural(allowed, "GPU") +
                        (allowed < found ? " allowed by gpu_ids " + *c.gpu_ids : " found"));
  }
  if (problems.empty()) {
    return ok("gpus",
              plural(local, "process") + " on " + plural(allowed, "usable GPU") +
                  (c.gpu_ids && *c.gpu_ids != "all" ? " (gpu_ids " + *c.gpu_ids + ")" : ""));
  }
  std::string finding = problems.front();
  for (size_t i = 1; i < problems.size(); ++i) finding += "; " + problems[i];
  return fail("gpus", finding + where(facts),
              found == 0 ? "run on a machine with GPUs, or make it a CPU job: `accel launch --cpu` "
                           "or use_cpu: true"
                         : "lower num_processes to " + std::to_string(allowed) +
                               " per machine, or list existing GPUs "
                               "(0-" +
                               std::to_string(found - 1) + ") in gpu_ids");
}

CheckItem checkDriver(const ConfigFacts& facts, const GpuInfo& gpus, const std::string& buildCuda,
                      const PythonInfo& python) {
  const bool gpuJob = facts.config && isGpuJob(*facts.config);
  if (!gpus.cuda_usable) {
    if (!gpuJob)
      return ok("driver", "no GPU here (" + gpus.cuda_status +
                              "): driver, CUDA and NCCL not needed for a CPU job");
    return fail(
        "driver", "no usable CUDA driver for a GPU job: " + gpus.cuda_status,
        "install the NVIDIA driver (nvidia-smi must list the GPUs) or run the job with --cpu");
  }
  const int driver = gpus.driver_cuda_version.value_or(0);
  std::string finding =
      "driver " + gpus.driver_version.value_or("?") + " (CUDA " + cudaVersionString(driver) + ")";
  auto tooOld = [&](const std::string& what, const std::string& cuda) -> std::optional<CheckItem> {
    auto code = cudaVersionCode(cuda);
    if (!code || *code <= driver) return std::nullopt;
    return fail("driver",
                finding + " is older than the CUDA " + cuda + " " + what + " was built with",
                "upgrade the NVIDIA driver to one for CUDA " + cuda + " or newer");
  };
  if (auto bad = tooOld("accel", buildCuda)) return *bad;
  if (python.torch) {
    if (auto cuda = torchCudaVersion(*python.torch)) {
      if (auto bad = tooOld("torch " + *python.torch, *cuda)) return *bad;
      finding += ", torch for CUDA " + *cuda;
    }
  }
  if (!gpus.nccl_version) {
    if (!gpuJob)
      return ok("driver",
                finding + "; NCCL not found (" + gpus.nccl_status + "), not needed for a CPU job");
    return warn("driver",
                finding + "; libnccl.so.2 not found (" + gpus.nccl_status +
                    "): libaccel's NCCL communicator cannot run",
                "install NCCL (apt install libnccl2, or add its lib directory to LD_LIBRARY_PATH); "
                "torch wheels bring their "
                "own");
  }
  return ok("driver", finding + ", NCCL " + *gpus.nccl_version);
}

CheckItem checkPort(const ConfigFacts& facts, const NetworkProbes& net) {
  if (auto missing = configMissing("port", facts)) return *missing;
  const config::ClusterConfig& c = *facts.config;
  const int port = c.main_process_port.value_or(0);
  if (port == 0) {
    if (c.num_machines > 1) {
      return fail("port",
                  "main_process_port is not set, but " + plural(c.num_machines, "machine") +
                      " must meet at one port" + where(facts),
                  "set main_process_port (e.g. 29500) in the config or pass --main_process_port");
    }
    return ok("port", std::string(c.main_process_port ? "main_process_port 0"
                                                      : "main_process_port not set") +
                          ": launch binds a free port for the job's store");
  }
  if (c.machine_rank != 0) {
    return ok("port", "port " + std::to_string(port) + " is machine 0's (this is machine_rank " +
                          std::to_string(c.machine_rank) + "); see the network item");
  }
  auto free = net.port_free(port);
  if (free) return ok("port", "port " + std::to_string(port) + " is free");
  std::string finding = free.error();
  const std::string flag = "--main_process_port: ";  // launcher's wording, for a flag
  if (finding.rfind(flag, 0) == 0) finding.erase(0, flag.size());
  if (auto cut = finding.find("; choose another"); cut != std::string::npos) finding.erase(cut);
  return fail("port", finding + where(facts),
              c.num_machines > 1
                  ? "stop the program holding it, or set another main_process_port on every machine"
                  : "stop the program holding it, or set main_process_port to another port (0 or "
                    "unset: launch picks a free one)");
}

// The host-name half of the network item: a finding, and a fix when it is a WARN.
std::pair<std::string, std::string> hostnameFinding(const HostFacts& host) {
  const std::string etcHosts =
      "map " + host.hostname + " to this machine's address on the job's network in /etc/hosts";
  if (!host.resolve_error.empty()) {
    return {"host name " + host.hostname + " does not resolve (" + host.resolve_error +
                "): tools that find this machine by name fail",
            etcHosts};
  }
  const bool loopback =
      std::all_of(host.addresses.begin(), host.addresses.end(),
                  [](const std::string& a) { return a.rfind("127.", 0) == 0 || a == "::1"; });
  if (loopback) {
    return {"host name " + host.hostname + " resolves only to loopback (" + host.addresses.front() +
                "): peers that find this machine by name reach themselves",
            etcHosts};
  }
  return {"host name " + host.hostname + " resolves to " + host.addresses.front(), ""};
}

CheckItem checkNetwork(const ConfigFacts& facts, const HostFacts& host, const NetworkProbes& net) {
  if (auto missing = configMissing("network", facts)) return *missing;
  const config::ClusterConfig& c = *facts.config;
  if (c.num_machines <= 1)
    return ok("network", "one machine: host name and master address not needed");
  auto [names, nameFix] = hostnameFinding(host);
  // A loopback or unresolved host name is a WARN, not a FAIL: launch sets GLOO_SOCKET_IFNAME
  // to the interface that reaches the master, so Gloo does not depend on it.
  CheckItem item{"network", nameFix.empty() ? CheckStatus::Ok : CheckStatus::Warn, names, nameFix};
  auto add = [&](CheckStatus status, const std::string& finding, const std::string& fix) {
    item.status = std::max(item.status, status);
    item.finding += "; " + finding;
    if (!fix.empty()) item.fix += (item.fix.empty() ? "" : "; ") + fix;
    return item;
  };
  if (!c.main_process_ip) {
    return add(CheckStatus::Fail,
               "main_process_ip is not set for " + plural(c.num_machines, "machine") + where(facts),
               "set main_process_ip to machine 0's address on every machine");
  }
  const std::string master =
      *c.main_process_ip + ":" + std::to_string(c.main_process_port.value_or(0));
  auto route = net.route(*c.main_process_ip);
  if (!route)
    return add(CheckStatus::Fail, "master " + master + ": " + route.error(),
               "check main_process_ip (every machine must resolve it) and this machine's routes");
  if (c.machine_rank == 0)
    return add(CheckStatus::Ok,
               "this is machine 0, the master at " + master + " (via " + *route + ")", "");
  if (auto reached = net.reach(*c.main_process_ip, c.main_process_port.value_or(0)); !reached) {
    // The master's agent may simply start later than this one: launch waits for it
    // (--rdzv_timeout).
    return add(CheckStatus::Warn,
               "master " + master + " via " + *route + " is not reachable yet: " + reached.error(),
               "start machine 0's `accel launch` (launch waits --rdzv_timeout for it), or open the "
               "port in its firewall");
  }
  return add(CheckStatus::Ok, "master " + master + " answers via " + *route, "");
}

CheckItem checkShm(std::optional<uint64_t> shmBytes) {
  const std::string fix =
      "docker run --shm-size=8g ..., or `mount -o remount,size=8G /dev/shm` as root";
  if (!shmBytes)
    return warn("shm", "/dev/shm is not mounted: NCCL and DataLoader workers need shared memory",
                fix);
  char size[48];
  std::snprintf(size, sizeof size, "%.2f GiB", static_cast<double>(*shmBytes) / (1ull << 30));
  if (*shmBytes < kShmWarnBytes) {
    return warn("shm",
                std::string("/dev/shm is ") + size +
                    " (below 1 GiB): NCCL and DataLoader workers may fail with "
                    "bus errors",
                fix);
  }
  return ok("shm", std::string("/dev/shm is ") + size);
}

CheckItem checkUlimit(const ConfigFacts& facts, uint64_t softLimit) {
  if (auto missing = configMissing("ulimit", facts)) return *missing;
  const int world = worldSize(*facts.config);
  const uint64_t need = fdsNeeded(world);
  const std::string have = "open files (ulimit -n) " + std::to_string(softLimit);
  if (softLimit < need) {
    return warn("ulimit",
                have + " is below " + std::to_string(need) + " (256 + 4 per rank) for " +
                    plural(world, "rank"),
                "`ulimit -n " + std::to_string(need) +
                    "` in the shell that runs accel launch (raise the hard limit in "
                    "/etc/security/limits.conf if refused)");
  }
  return ok("ulimit", have + " ≥ " + std::to_string(need) + " needed for " + plural(world, "rank"));
}

CheckItem checkPythonForConfig(const ConfigFacts& facts, const PythonInfo& p) {
  if (auto missing = configMissing("paradigm", facts)) return *missing;
  const config::ClusterConfig& c = *facts.config;
  std::vector<std::string> problems, fine;
  if (c.distributed_type == config::kDistributedDeepSpeed) {
    if (p.deepspeed)
      fine.push_back("deepspeed " + *p.deepspeed);
    else
      problems.push_back("distributed_type DEEPSPEED, but " + p.command + " has no deepspeed");
  }
  std::string backend = "NO";
  if (auto it = c.extras.find("dynamo_config"); it != c.extras.end() && it->second.is_object())
    backend = it->second.value("dynamo_backend", std::string("NO"));
  if (backend != "NO") {
    auto mm = p.torch ? parseMajorMinor(*p.torch) : std::nullopt;
    if (mm && mm->first >= 2)
      fine.push_back("torch.compile (torch " + *p.torch + ") for dynamo " + backend);
    else
      problems.push_back("dynamo_backend " + backend + " needs torch.compile (torch 2.0+), and " +
                         p.command + " has " + (p.torch ? "torch " + *p.torch : "no torch"));
  }
  if (!problems.empty()) {
    std::string finding;
    for (const auto& x : problems) finding += (finding.empty() ? "" : "; ") + x;
    return fail("paradigm", finding + where(facts),
                "pip install deepspeed / torch>=2.0 into it, point launch at an interpreter that "
                "has them (--python), or change the config");
  }
  if (fine.empty()) return ok("paradigm", "no DeepSpeed or torch dynamo in the config");
  std::string finding;
  for (const auto& x : fine) finding += (finding.empty() ? "" : ", ") + x;
  return ok("paradigm", finding + " in " + p.command);
}

namespace {

// The fix for an interpreter without torch: the one here that has it, when there is one, else
// `otherwise`.
std::string useThePythonWithTorch(const std::optional<PythonInfo>& withTorch,
                                  const std::string& install, const std::string& otherwise) {
  if (!withTorch || !withTorch->torch) return otherwise;
  const std::string& py = withTorch->command;
  return py + " has torch " + *withTorch->torch + ": launch with --python " + py +
         " (or PYTHON_EXEC=" + py + "), or " + install;
}

}  // namespace

CheckItem checkPython(const PythonInfo& p, const std::optional<PythonInfo>& withTorch) {
  const std::string other =
      "pip install torch into it, or point launch at one that has torch (--python or $PYTHON_EXEC)";
  if (!p.error.empty()) {
    return warn("python",
                p.command + " unavailable (" + p.error + "): .py scripts cannot be launched",
                useThePythonWithTorch(withTorch, "install python3 with torch",
                                      "install python3 with torch, or point launch at an "
                                      "interpreter that has it (--python or $PYTHON_EXEC)"));
  }
  const std::string who = p.command + " (" + p.executable + ", Python " + p.version + ")";
  if (!p.torch)
    return warn("python", who + " has no torch: torch.distributed scripts will fail to import it",
                useThePythonWithTorch(withTorch, "pip install torch into it", other));
  auto mm = parseMajorMinor(*p.torch);
  if (!mm)
    return warn("python", who + ": torch version '" + *p.torch + "' is not understood", other);
  if (storeServesTorch(*mm))
    return ok("python", who + " has torch " + *p.torch + " (the job's store speaks its protocol)");
  const std::string range = "1.13 - 2.14";
  if (*mm > kNewestServedTorch) {
    return warn("python",
                who + " has torch " + *p.torch + ", newer than the store's protocols (torch " +
                    range + "): its TCPStore client may send queries the store does not know",
                "use torch " + range + ", or an accel that knows this release");
  }
  return fail(
      "python",
      who + " has torch " + *p.torch + ", older than the store serves (torch " + range + ")",
      "upgrade torch to 1.13 or newer (pip install 'torch>=1.13')");
}

uint64_t fdsNeeded(int worldSize) {
  return 256 + 4 * static_cast<uint64_t>(std::max(worldSize, 1));
}

std::optional<std::pair<int, int>> parseMajorMinor(const std::string& version) {
  int major = 0, minor = 0, used = 0;
  if (std::sscanf(version.c_str(), "%4d.%4d%n", &major, &minor, &used) != 2) return std::nullopt;
  const char next = version.c_str()[used];
  if (next != '\0' && next != '.' && next != '+' && next != 'a' && next != 'b' && next != 'r' &&
      next != 'd') {
    return std::nullopt;
  }
  if (major < 0 || minor < 0) return std::nullopt;
  return std::make_pair(major, minor);
}

std::optional<std::string> torchCudaVersion(const std::string& torchVersion) {
  auto plus = torchVersion.find("+cu");
  if (plus == std::string::npos) return std::nullopt;
  std::string digits = torchVersion.substr(plus + 3);
  if (digits.size() < 3 || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return std::nullopt;
  return digits.substr(0, digits.size() - 1) + "." + digits.substr(digits.size() - 1);
}

bool storeServesTorch(std::pair<int, int> mm) {
  return mm >= kOldestServedTorch && mm <= kNewestServedTorch;
}

std::optional<int> cudaVersionCode(const std::string& version) {
  auto mm = parseMajorMinor(version);
  if (!mm || version.find('+') != std::string::npos) return std::nullopt;
  return mm->first * 1000 + mm->second * 10;
}

namespace {

ConfigFacts readConfig(const std::optional<std::string>& configFile, const config::PathEnv& env) {
  ConfigFacts facts;
  facts.default_path = config::defaultConfigPath(env);
  auto path = config::resolveConfigPath(configFile, env);
  if (!path) {
    facts.error = path.error();
    return facts;
  }
  facts.path = *path;
  if (!facts.path) {
    facts.config = config::ClusterConfig{};
    return facts;
  }
  auto loaded = config::loadConfig(*facts.path);
  if (loaded) {
    facts.config = std::move(*loaded);
  } else {
    facts.error = loaded.error();
  }
  return facts;
}

HostFacts resolveHostname() {
  HostFacts host;
  char name[HOST_NAME_MAX + 1] = {0};
  ::gethostname(name, sizeof name - 1);
  host.hostname = name;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = ::getaddrinfo(name, nullptr, &hints, &list); rc != 0) {
    host.resolve_error = ::gai_strerror(rc);
    return host;
  }
  for (addrinfo* a = list; a; a = a->ai_next) {
    char buf[NI_MAXHOST] = {0};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) ==
        0) {
      host.addresses.push_back(buf);
    }
  }
  ::freeaddrinfo(list);
  if (host.addresses.empty()) host.resolve_error = "no address";
  return host;
}

std::optional<uint64_t> shmSize() {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
}

uint64_t softFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return limit.rlim_cur;
}

}  // namespace

CheckItem checkBlas(const PythonInfo& p) {
  if (!p.blas) return ok("blas", "no torch to look at");
  const std::string who = "torch under " + p.command;
  if (p.blas->slow()) {
    return warn("blas",
                who + " runs its matrix products on the " + describeBlas(*p.blas) +
                    " (fp32 training about 17x slower than on OpenBLAS)",
                kBlasFix);
  }
  return ok("blas", who + ": " + describeBlas(*p.blas));
}

namespace {

// The interpreter launch would run .py scripts with (worker_setup.cc's order); `notice` is
// pythonWithTorchByDefault's when it chose.
std::string launchPython(const ConfigFacts& facts, std::string& notice) {
  if (facts.config) {
    const auto& extras = facts.config->extras;
    if (auto it = extras.find("accel_python"); it != extras.end() && it->second.is_string())
      return it->second.get<std::string>();
  }
  if (const char* exec = std::getenv("PYTHON_EXEC"); exec && *exec) return exec;
  DefaultPython chosen = pythonWithTorchByDefault();
  notice = chosen.notice;
  return chosen.command;
}

}  // namespace

std::vector<CheckItem> runPreflight(const PreflightOptions& o) {
  ConfigFacts facts = readConfig(o.config_file, o.env);
  std::string notice;
  const std::string interpreter = o.python ? *o.python : launchPython(facts, notice);
  // python3's start is the slow part: probe it while the rest is read.
  auto python = std::async(std::launch::async, probePythonAndBlas, interpreter);
  GpuInfo gpus = probeGpus();
  HostFacts host = resolveHostname();
  PythonInfo py = python.get();
  std::optional<PythonInfo> withTorch;
  if (!py.torch) withTorch = otherPythonWithTorch(py);
  CheckItem pythonItem = checkPython(py, withTorch);
  if (!notice.empty()) pythonItem.finding += "; launch chose it: " + notice;
  return {checkConfigFile(facts),
          checkGpus(facts, gpus),
          checkDriver(facts, gpus, o.build_cuda, py),
          checkPort(facts, o.net),
          checkNetwork(facts, host, o.net),
          checkShm(shmSize()),
          checkUlimit(facts, softFileLimit()),
          pythonItem,
          checkPythonForConfig(facts, py),
          checkBlas(py)};
}

bool preflightOk(const std::vector<CheckItem>& items) {
  return std::none_of(items.begin(), items.end(),
                      [](const CheckItem& i) { return i.status == CheckStatus::Fail; });
}

std::string renderPreflightText(const std::vector<CheckItem>& items) {
  std::ostringstream out;
  int fails = 0, warns = 0;
  for (const auto& i : items) {
    std::string status = statusName(i.status);
    out << status << std::string(6 - status.size(), ' ') << i.name << ": " << i.finding << "\n";
    if (i.status != CheckStatus::Ok) out << "      fix: " << i.fix << "\n";
    fails += i.status == CheckStatus::Fail;
    warns += i.status == CheckStatus::Warn;
  }
  out << (fails ? "preflight failed: " : "preflight passed: ") << plural(fails, "failure") << ", "
      << plural(warns, "warning") << "\n";
  return out.str();
}

nlohmann::json renderPreflightJson(const std::vector<CheckItem>& items) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& i : items) {
    list.push_back({{"name", i.name},
                    {"status", statusName(i.status)},
                    {"finding", i.finding},
                    {"fix", i.fix}});
  }
  return {{"items", list}, {"ok", preflightOk(items)}};
}

}  // namespace accel::probes
