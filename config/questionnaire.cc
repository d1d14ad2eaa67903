#include "config/questionnaire.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "config/questionnaire_session.h"

namespace accel::config {
namespace detail {

bool Session::deepSpeedConfigFile() const {
  auto it = config.extras.find("deepspeed_config");
  return is(kDistributedDeepSpeed) && it != config.extras.end() &&
         it->second.contains("deepspeed_config_file");
}

}  // namespace detail

namespace {

using detail::Session;

// accelerate's machine-type menu, in its order, so answers by number match accelerate's; what
// accel cannot launch stays listed, marked, and is refused when chosen.
constexpr const char* kOtherDevices = "accel launches CPU and NVIDIA GPU jobs only";
const std::vector<Prompter::Option> kMachineTypes = {"No distributed training",
                                                     "multi-CPU",
                                                     {"multi-XPU", kOtherDevices},
                                                     {"multi-HPU", kOtherDevices},
                                                     "multi-GPU",
                                                     {"multi-NPU", kOtherDevices},
                                                     {"multi-MLU", kOtherDevices},
                                                     {"multi-SDAA", kOtherDevices},
                                                     {"multi-MUSA", kOtherDevices},
                                                     {"multi-NEURON", kOtherDevices},
                                                     {"TPU", kOtherDevices}};
constexpr int kMachineNo = 0;
constexpr int kMachineMultiCpu = 1;

const std::vector<std::string> kPrecisions = {"no", "fp16", "bf16", "fp8"};

std::optional<std::string> checkAtLeastOne(const int& n) {
  if (n >= 1) return std::nullopt;
  return "must be at least 1";
}

Prompter::Check<int> checkMachineRank(int machines) {
  return [machines](const int& r) -> std::optional<std::string> {
    if (r >= 0 && r < machines) return std::nullopt;
    return "must be between 0 and " + std::to_string(machines - 1);
  };
}

// An IPv4 address written as one (digits and dots only): four numbers of 0 to 255.
bool validDottedQuad(const std::string& s) {
  int parts = 0;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t dot = std::min(s.find('.', at), s.size());
    const std::string part = s.substr(at, dot - at);
    if (part.empty() || part.size() > 3 || std::stoi(part) > 255) return false;
    ++parts;
    at = dot + 1;
  }
  return parts == 4;
}

std::optional<std::string> checkHost(const std::string& s) {
  if (s.empty()) return "an address or host name is required";
  if (s.find_first_of(" \t/") != std::string::npos)
    return "'" + s + "' is not a host name or IP address";
  if (s.find_first_not_of("0123456789.") == std::string::npos && !validDottedQuad(s))
    return "'" + s + "' is not an IP address (four numbers of 0 to 255)";
  return std::nullopt;
}

std::optional<std::string> checkPort(const int& p) {
  if (p >= 1 && p <= 65535) return std::nullopt;
  return "must be between 1 and 65535";
}

// accel's rendezvous: static, c10d (machines ranked by arrival), or etcd (the rounds live in the
// etcd cluster at the main process's address and port, etcd's v3 API; etcd-v2 is its alias).
std::optional<std::string> checkRdzvBackend(const std::string& s) {
  if (s == "static" || s == "c10d" || s == "etcd" || s == "etcd-v2") return std::nullopt;
  return "'" + s + "' is not one of 'static', 'c10d', 'etcd'";
}

Prompter::Check<int> checkProcessCount(int machines, bool multiGpu) {
  return [machines, multiGpu](const int& n) -> std::optional<std::string> {
    if (n < 1) return "must be at least 1";
    if (n < machines || n % machines != 0) {
      return "the total must be a multiple of the number of machines (" + std::to_string(machines) +
             ")";
    }
    if (multiGpu && machines == 1 && n == 1) {
      return "multi-GPU on one machine needs at least 2 GPUs; for one GPU choose 'No distributed "
             "training'";
    }
    return std::nullopt;
  };
}

// A hostfile mpirun will read: an existing readable file, else why not and what it holds.
std::optional<std::string> checkReadableFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "hostfile '" + path + "' does not exist (one line per host: 'HOST slots=N')";
  if (S_ISDIR(st.st_mode)) return "hostfile '" + path + "' is a directory";
  if (::access(path.c_str(), R_OK) != 0) return "hostfile '" + path + "' is not readable";
  return std::nullopt;
}

// accel runs only on "This machine"; the answer itself is not stored.
Expected<void> askEnvironment(Session& s) {
  ACCEL_ASK(
      environment,
      s.ask.menu(
          "In which compute environment are you running?",
          {"This machine", {"AWS (Amazon SageMaker)", "accel launches on this machine only"}}, 0));
  (void)environment;
  return {};
}

Expected<void> askMachineType(Session& s) {
  ACCEL_ASK(machine, s.ask.menu("Which type of machine are you using?", kMachineTypes, 0));
  s.config.distributed_type = machine == kMachineNo         ? std::string(kDistributedNo)
                              : machine == kMachineMultiCpu ? std::string(kDistributedMultiCpu)
                                                            : std::string(kDistributedMultiGpu);
  s.config.same_network = true;
  return {};
}

// Only with more than one machine: this one's rank, and how to reach the main process.
Expected<void> askMainProcess(Session& s) {
  const int machines = s.config.num_machines;
  ACCEL_ASK(rank, s.ask.integer("What is the rank of this machine (0 to " +
                                    std::to_string(machines - 1) + ")?",
                                0, checkMachineRank(machines)));
  s.config.machine_rank = rank;
  ACCEL_ASK(ip, s.ask.text("What is the IP address of the machine that will host the main process?",
                           std::nullopt, checkHost));
  s.config.main_process_ip = ip;
  ACCEL_ASK(port,
            s.ask.integer("What is the port you will use to communicate with the main process?",
                          29500, checkPort));
  s.config.main_process_port = port;
  ACCEL_ASK(
      sameNetwork,
      s.ask.yesNo("Are all the machines on the same local network? Answer `no` if nodes are on "
                  "the cloud and/or on different network hosts",
                  true));
  s.config.same_network = sameNetwork;
  if (!sameNetwork) {
    ACCEL_ASK(backend,
              s.ask.text("What rendezvous backend will you use? ('static', 'c10d', 'etcd')",
                         std::string("static"), checkRdzvBackend));
    s.config.rdzv_backend = backend;
  }
  return {};
}

// Only for multi-CPU and multi-GPU: how many machines (and, with several, how they meet).
Expected<void> askMachines(Session& s) {
  if (s.is(kDistributedNo)) return {};
  ACCEL_ASK(
      machines,
      s.ask.integer("How many different machines will you use (use more than 1 for multi-node "
                    "training)?",
                    1, checkAtLeastOne));
  s.config.num_machines = machines;
  if (machines > 1) {
    if (auto ok = askMainProcess(s); !ok) return ok;
  }
  ACCEL_ASK(debug,
            s.ask.yesNo(
                "Should distributed operations be checked while running for errors? This can avoid "
                "timeout issues but will be slower.",
                false));
  s.config.debug = debug;
  return {};
}

// Asked without distribution only; multi-CPU is CPU-only by definition.
Expected<void> askCpuOnly(Session& s) {
  if (!s.is(kDistributedNo)) {
    s.config.use_cpu = s.is(kDistributedMultiCpu);
    return {};
  }
  ACCEL_ASK(
      cpuOnly,
      s.ask.yesNo("Do you want to run your training on CPU only (even if a GPU / Apple Silicon / "
                  "Ascend NPU device is available)?",
                  false));
  s.config.use_cpu = cpuOnly;
  return {};
}

// Multi-CPU only, as accelerate asks it: with a hostfile, accel launch runs the job through
// mpirun with accelerate's arguments (launcher/plan/launch_plan.cc) instead of an agent per
// machine.
Expected<void> askMpirun(Session& s) {
  if (!s.is(kDistributedMultiCpu)) return {};
  ACCEL_ASK(useMpirun, s.ask.yesNo("Do you want accel to launch mpirun?", false));
  if (!useMpirun) return {};
  const PathEnv& env = s.env;
  ACCEL_ASK(hostfile, s.ask.text("Please enter the path to the hostfile to use with mpirun",
                                 std::string("~/hostfile"),
                                 [&env](const std::string& path) -> std::optional<std::string> {
                                   return checkReadableFile(expandUser(path, env));
                                 }));
  s.config.extras["mpirun_config"] = {{"mpirun_hostfile", expandUser(hostfile, s.env)}};
  return {};
}

// The total over all machines; one process without distribution.
Expected<void> askProcessCount(Session& s) {
  if (s.is(kDistributedNo)) {
    s.config.num_processes = 1;
    return {};
  }
  const std::string what = s.is(kDistributedMultiCpu) ? "processes" : "GPU(s)";
  // A default the check accepts: one per machine, two for multi-GPU on one machine.
  const bool multiGpu = s.is(kDistributedMultiGpu);
  const int machines = s.config.num_machines;
  ACCEL_ASK(processes,
            s.ask.integer("How many " + what +
                              " should be used for distributed training, in total over all "
                              "machines?",
                          multiGpu && machines == 1 ? 2 : machines,
                          checkProcessCount(machines, multiGpu)));
  s.config.num_processes = processes;
  return {};
}

// Which GPUs, and CPU affinity, for NO and MULTI_GPU on GPUs (accelerate asks neither for
// DeepSpeed or FSDP).
Expected<void> askGpus(Session& s) {
  if (!(s.is(kDistributedMultiGpu) || s.is(kDistributedNo)) || s.config.use_cpu) return {};
  ACCEL_ASK(
      ids,
      s.ask.text(
          "What GPU(s) (by id) should be used for training on this machine as a comma-separated "
          "list?",
          std::string("all"), checkGpuIds));
  s.config.gpu_ids = ids;
  ACCEL_ASK(
      numa,
      s.ask.yesNo("Would you like to enable numa efficiency? (Currently only supported on NVIDIA "
                  "hardware).",
                  false));
  s.config.enable_cpu_affinity = numa;
  return {};
}

// Not asked when DeepSpeed reads its own JSON file, which then decides (the key is left out).
// fp8 goes on to its backend's questions.
Expected<void> askPrecision(Session& s) {
  if (s.deepSpeedConfigFile()) return {};
  std::vector<Prompter::Option> options(kPrecisions.begin(), kPrecisions.end());
  if (s.config.use_cpu) {  // config::precisionNeedsGpu
    options[1].unsupported =
        "needs a GPU and this configuration is CPU-only (accel does not fake fp16 in fp32)";
    options[3].unsupported = "needs a GPU and this configuration is CPU-only";
    options[1].tag = options[3].tag = "needs a GPU";
  }
  ACCEL_ASK(precision, s.ask.menu("Do you wish to use mixed precision?", options, 0));
  s.config.mixed_precision = kPrecisions[static_cast<size_t>(precision)];
  if (s.config.mixed_precision == "fp8") return detail::askFp8(s);
  return {};
}

}  // namespace

Expected<ClusterConfig> runQuestionnaire(std::istream& in, std::ostream& out, const PathEnv& env) {
  Prompter ask(in, out);
  Session s{ask, env, ClusterConfig{}};
  for (auto section :
       {askEnvironment, askMachineType, askMachines, askCpuOnly, askMpirun, detail::askDynamo,
        detail::askDeepSpeed, detail::askFsdp, detail::askParallelism, detail::askMegatron,
        askProcessCount, askGpus, askPrecision}) {
    if (auto ok = section(s); !ok) return std::move(ok).takeError();
  }
  addAccelerateDefaults(s.config);
  return std::move(s.config);
}

}  // namespace accel::config
