#pragma once
// `accel env --check`: a preflight doctor for `accel launch`. Each check is a pure function from
// facts (the config, what the probes found) to one item — OK, WARN or FAIL, what was found and,
// when not OK, the fix in one line — so its rules are unit-tested without this machine.
// runPreflight() gathers the facts and runs every check.
//
// WARN is for what may still work or cannot be known from here (the master of a multi-machine
// job not listening yet, /dev/shm small, no torch for a job that may not use it); FAIL is for
// what makes `accel launch` refuse or the job fail for sure.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "config/paths.h"
#include "libaccel/common/expected.h"
#include "probes/gpu_probe.h"
#include "probes/python_probe.h"

namespace accel::probes {

enum class CheckStatus { Ok, Warn, Fail };

struct CheckItem {
  std::string name;  // "config", "gpus", "driver", "port", "network", "shm", "ulimit", "python"
  CheckStatus status = CheckStatus::Ok;
  std::string finding;  // what was found, naming the thing (file:line, port, GPU id)
  std::string fix;      // one line; "" when OK
};

// "OK", "WARN", "FAIL".
const char* statusName(CheckStatus status);

// The config file as `accel launch` would read it.
struct ConfigFacts {
  std::optional<std::string> path;  // the file in use; nullopt: none (launch defaults)
  std::string default_path;         // where accel looks without --config_file
  std::string error;                // the loader's error (names file:line), "" when fine
  std::optional<config::ClusterConfig> config;  // the loaded config, or defaults; nullopt on error
};

// The launcher's network code, injected: probes/ does not depend on launcher/ (apps/accel wires
// launcher::checkPortFree, routeTo and waitForListener in). Each may block for a few seconds.
struct NetworkProbes {
  std::function<Expected<void>(int port)> port_free;  // nobody listens on it here
  std::function<Expected<std::string>(const std::string& host)>
      route;  // the local interface to host
  std::function<Expected<void>(const std::string& host, int port)>
      reach;  // one short connection try
};

// This machine's host name and what it resolves to.
struct HostFacts {
  std::string hostname;
  std::vector<std::string> addresses;  // numeric, as getaddrinfo returned them
  std::string resolve_error;           // "" when it resolved
};

// --- The checks (pure: no I/O except through the functions passed in) ---

CheckItem checkConfigFile(const ConfigFacts& facts);
// num_processes per machine against the GPUs found and gpu_ids, for GPU distributed types.
CheckItem checkGpus(const ConfigFacts& facts, const GpuInfo& gpus);
// The driver's CUDA against the CUDA accel was built with (`buildCuda`, "" for none) and the
// one torch was built for ("+cu124" in its version); NCCL found, for a GPU job.
CheckItem checkDriver(const ConfigFacts& facts, const GpuInfo& gpus, const std::string& buildCuda,
                      const PythonInfo& python);
// main_process_port free here, on machine_rank 0.
CheckItem checkPort(const ConfigFacts& facts, const NetworkProbes& net);
// num_machines > 1: this host name resolves to a non-loopback address; main_process_ip resolves
// and routes from here (machine 0 included: every machine needs it); machine_rank > 0: the
// master's main_process_ip:port answers (WARN when not yet: its agent may start later).
CheckItem checkNetwork(const ConfigFacts& facts, const HostFacts& host, const NetworkProbes& net);
// /dev/shm's size in bytes (nullopt: not mounted).
CheckItem checkShm(std::optional<uint64_t> shmBytes);
// The soft RLIMIT_NOFILE against fdsNeeded() for the config's world size.
CheckItem checkUlimit(const ConfigFacts& facts, uint64_t softLimit);
// The interpreter launch runs .py scripts with: torch found, a release the job's store serves.
// When it has no torch (or cannot run), the fix names `withTorch`, another interpreter on this
// machine that has it (otherPythonWithTorch), if any.
CheckItem checkPython(const PythonInfo& python,
                      const std::optional<PythonInfo>& withTorch = std::nullopt);
// What the config's paradigm needs of that interpreter: deepspeed importable for DEEPSPEED,
// torch.compile (torch 2.0+) for a dynamo_config backend other than NO.
CheckItem checkPythonForConfig(const ConfigFacts& facts, const PythonInfo& python);

// The BLAS the interpreter's torch loads (PythonInfo::blas): WARN on the reference BLAS, with
// the package that replaces it.
CheckItem checkBlas(const PythonInfo& python);

// --- Pure helpers, unit-tested ---

inline constexpr uint64_t kShmWarnBytes = 1ull << 30;  // below this: WARN

// The open files an agent or a worker may need for a job of `worldSize` ranks: 256 for the
// process itself (libraries, logs, pipes of its local ranks) plus 4 per rank — on machine 0 the
// store holds up to 2 connections per rank (torch 1.13 opens a second one for callbacks), and
// every worker's Gloo full mesh holds a socket per peer (NCCL's bootstrap another).
uint64_t fdsNeeded(int worldSize);

// (major, minor) of "2.6.0", "2.6.0+cu124", "1.13.1a0+git", "2.11"; nullopt for anything else.
std::optional<std::pair<int, int>> parseMajorMinor(const std::string& version);

// "12.4" for a torch version "2.6.0+cu124", "11.8" for "+cu118"; nullopt without a +cuXYZ tag.
std::optional<std::string> torchCudaVersion(const std::string& torchVersion);

// The torch releases whose TCPStore protocol the job's store speaks (libaccel/store/
// wire_protocol.cc's generation table: 1.13, 2.0, 2.1, 2.2 – 2.14; checked against it in tests).
inline constexpr std::pair<int, int> kOldestServedTorch{1, 13};
inline constexpr std::pair<int, int> kNewestServedTorch{2, 14};
bool storeServesTorch(std::pair<int, int> majorMinor);

// CUDA "12.4" as the driver's version code 12040; nullopt when malformed.
std::optional<int> cudaVersionCode(const std::string& version);

// --- Running it ---

struct PreflightOptions {
  std::optional<std::string> config_file;  // --config_file
  config::PathEnv env;
  // The interpreter to check (env --check --python); nullopt: the one launch would use — the
  // config's accel_python, else $PYTHON_EXEC, else pythonWithTorchByDefault().
  std::optional<std::string> python;
  std::string build_cuda;  // the CUDA toolkit accel was built with, "" when none
  NetworkProbes net;
};

// Probes this machine and runs every check, in the order of CheckItem::name's list (then "blas").
// Blocks for at most a few seconds (python3's start, one connection try to a master). Never throws.
std::vector<CheckItem> runPreflight(const PreflightOptions& options);

// False when any item FAILs.
bool preflightOk(const std::vector<CheckItem>& items);

// One line per item, "OK    port: ...", then "      fix: ..." under WARN/FAIL, then a summary.
std::string renderPreflightText(const std::vector<CheckItem>& items);
// {"items": [{"name", "status", "finding", "fix"}], "ok": bool}.
nlohmann::json renderPreflightJson(const std::vector<CheckItem>& items);

}  // namespace accel::probes
