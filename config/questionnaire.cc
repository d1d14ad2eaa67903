#include "config/questionnaire.h"

#include <algorithm>
#include <cctype>

#include "config/prompter.h"

namespace accel::config {
namespace {

using nlohmann::json;

// accelerate's machine-type menu, in its order, so answers by number match accelerate's.
const std::vector<std::string> kMachineTypes = {
    "No distributed training", "multi-CPU", "multi-XPU", "multi-HPU", "multi-GPU", "multi-NPU",
    "multi-MLU", "multi-SDAA", "multi-MUSA", "multi-NEURON", "TPU"};
constexpr int kMachineNo = 0;
constexpr int kMachineMultiCpu = 1;
constexpr int kMachineMultiGpu = 4;

const std::vector<std::string> kDynamoBackends = {
    "eager", "aot_eager", "inductor", "aot_ts_nvfuser", "nvprims_nvfuser", "cudagraphs",
    "ofi", "fx2trt", "onnxrt", "tensorrt", "ipex", "tvm"};
const std::vector<std::string> kDynamoModes = {"default", "reduce-overhead", "max-autotune"};
const std::vector<std::string> kPrecisions = {"no", "fp16", "bf16", "fp8"};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// Reads as accelerate's questionnaire: one function per section of questions, in accelerate's
// order, each reading and filling a Session.

// Propagates a prompter error out of the enclosing section.
#define ACCEL_ASK(var, expr)                          \
  auto var##_answer = (expr);                         \
  if (!var##_answer) return std::move(var##_answer).takeError(); \
  auto var = *var##_answer

// What the sections share: the prompter, the answers so far, and the machine type chosen.
struct Session {
  Prompter& ask;
  const PathEnv& env;
  ClusterConfig config;
  int machine = kMachineNo;  // index into kMachineTypes

  bool multi() const { return machine != kMachineNo; }
};

std::optional<std::string> checkEnvironment(const int& i) {
  if (i == 1) return "AWS (Amazon SageMaker) is not supported by accel; choose 0";
  return std::nullopt;
}

std::optional<std::string> checkMachineType(const int& i) {
  if (i == kMachineNo || i == kMachineMultiCpu || i == kMachineMultiGpu) return std::nullopt;
  return kMachineTypes[i] + " is not supported by accel; choose 0 (No distributed training), 1 (multi-CPU) or 4 "
                            "(multi-GPU)";
}

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

std::optional<std::string> checkHost(const std::string& s) {
  if (s.empty()) return "an address or host name is required";
  if (s.find_first_of(" \t/") != std::string::npos) return "'" + s + "' is not a host name or IP address";
  return std::nullopt;
}

std::optional<std::string> checkPort(const int& p) {
  if (p >= 1 && p <= 65535) return std::nullopt;
  return "must be between 1 and 65535";
}

std::optional<std::string> checkRdzvBackend(const std::string& s) {
  const auto& choices = findField("rdzv_backend")->choices;
  for (auto ch : choices) {
    if (ch == s) return std::nullopt;
  }
  return "'" + s + "' is not one of " + joinChoices(choices);
}

Prompter::Check<int> checkProcessCount(int machines, bool gpu) {
  return [machines, gpu](const int& n) -> std::optional<std::string> {
    if (n < 1) return "must be at least 1";
    if (n < machines || n % machines != 0) {
      return "the total must be a multiple of the number of machines (" + std::to_string(machines) + ")";
    }
    if (gpu && machines == 1 && n == 1) {
      return "multi-GPU on one machine needs at least 2 GPUs; for one GPU choose 'No distributed training'";
    }
    return std::nullopt;
  };
}

Prompter::Check<int> checkPrecision(bool cpu) {
  return [cpu](const int& i) -> std::optional<std::string> {
    if (kPrecisions[i] == "fp8") return "fp8 is not supported by accel; choose no, fp16 or bf16";
    if (kPrecisions[i] == "fp16" && cpu) {
      return "fp16 needs a GPU (accel does not fake it in fp32 on CPU); choose no or bf16";
    }
    return std::nullopt;
  };
}

// accel runs only on "This machine"; the answer itself is not stored.
Expected<void> askEnvironment(Session& s) {
  ACCEL_ASK(environment, s.ask.menu("In which compute environment are you running?",
                                    {"This machine", "AWS (Amazon SageMaker)"}, 0, checkEnvironment));
  (void)environment;
  return {};
}

Expected<void> askMachineType(Session& s) {
  ACCEL_ASK(machine, s.ask.menu("Which type of machine are you using?", kMachineTypes, 0, checkMachineType));
  s.machine = machine;
  s.config.distributed_type = machine == kMachineNo         ? std::string(kDistributedNo)
                              : machine == kMachineMultiCpu ? std::string(kDistributedMultiCpu)
                                                            : std::string(kDistributedMultiGpu);
  s.config.same_network = true;
  return {};
}

// Only with more than one machine: this one's rank, and how to reach the main process.
Expected<void> askMainProcess(Session& s) {
  const int machines = s.config.num_machines;
  ACCEL_ASK(rank, s.ask.integer("What is the rank of this machine (0 to " + std::to_string(machines - 1) + ")?", 0,
                                checkMachineRank(machines)));
  s.config.machine_rank = rank;
  ACCEL_ASK(ip, s.ask.text("What is the IP address of the machine that will host the main process?", std::nullopt,
                           checkHost));
  s.config.main_process_ip = ip;
  ACCEL_ASK(port, s.ask.integer("What is the port you will use to communicate with the main process?", 29500, checkPort));
  s.config.main_process_port = port;
  ACCEL_ASK(sameNetwork, s.ask.yesNo("Are all the machines on the same local network? Answer `no` if nodes are on "
                                     "the cloud and/or on different network hosts",
                                     true));
  s.config.same_network = sameNetwork;
  if (!sameNetwork) {
    ACCEL_ASK(backend, s.ask.text("What rendezvous backend will you use? ('static', 'c10d', ...)",
                                  std::string("static"), checkRdzvBackend));
    s.config.rdzv_backend = backend;
  }
  return {};
}

// Only for multi-CPU and multi-GPU: how many machines (and, with several, how they meet).
Expected<void> askMachines(Session& s) {
  if (!s.multi()) return {};
  ACCEL_ASK(machines, s.ask.integer("How many different machines will you use (use more than 1 for multi-node "
                                    "training)?",
                                    1, checkAtLeastOne));
  s.config.num_machines = machines;
  if (machines > 1) {
    if (auto ok = askMainProcess(s); !ok) return ok;
  }
  ACCEL_ASK(debug, s.ask.yesNo("Should distributed operations be checked while running for errors? This can avoid "
                               "timeout issues but will be slower.",
                               false));
  s.config.debug = debug;
  return {};
}

// Asked without distribution only; multi-CPU is CPU-only by definition.
Expected<void> askCpuOnly(Session& s) {
  if (s.machine != kMachineNo) {
    s.config.use_cpu = s.machine == kMachineMultiCpu;
    return {};
  }
  ACCEL_ASK(cpuOnly, s.ask.yesNo("Do you want to run your training on CPU only (even if a GPU / Apple Silicon / "
                                 "Ascend NPU device is available)?",
                                 false));
  s.config.use_cpu = cpuOnly;
  return {};
}

Expected<void> askMpirun(Session& s) {
  if (s.machine != kMachineMultiCpu) return {};
  ACCEL_ASK(mpirun, s.ask.yesNo("Do you want accelerate to launch mpirun?", false));
  if (mpirun) {
    ACCEL_ASK(hostfile, s.ask.text("Please enter the path to the hostfile to use with mpirun", std::string("~/hostfile")));
    s.config.extras["mpirun_config"] = json{{"mpirun_hostfile", expandUser(hostfile, s.env)}};
  }
  return {};
}

// The torch.compile defaults, asked only when the user customises them.
Expected<void> askDynamoOptions(Session& s, json& section) {
  ACCEL_ASK(mode, s.ask.menu("Which mode do you want to use?", kDynamoModes, 0));
  section["dynamo_mode"] = kDynamoModes[mode];
  ACCEL_ASK(fullgraph,
            s.ask.yesNo("Do you want the fullgraph mode or it is ok to break model into several subgraphs?", false));
  section["dynamo_use_fullgraph"] = fullgraph;
  ACCEL_ASK(dynamic, s.ask.yesNo("Do you want to enable dynamic shape tracing?", false));
  section["dynamo_use_dynamic"] = dynamic;
  ACCEL_ASK(regional, s.ask.yesNo("Do you want to enable regional compilation?", false));
  section["dynamo_use_regional_compilation"] = regional;
  return {};
}

Expected<void> askDynamo(Session& s) {
  ACCEL_ASK(dynamo, s.ask.yesNo("Do you wish to optimize your script with torch dynamo?", false));
  if (!dynamo) return {};
  json section;
  ACCEL_ASK(backend, s.ask.menu("Which dynamo backend would you like to use?", kDynamoBackends, 2));
  section["dynamo_backend"] = upper(kDynamoBackends[backend]);
  ACCEL_ASK(customize, s.ask.yesNo("Do you want to customize the defaults sent to torch.compile?", false));
  if (customize) {
    if (auto ok = askDynamoOptions(s, section); !ok) return ok;
  }
  s.config.extras["dynamo_config"] = section;
  return {};
}

// The total over all machines; one process without distribution.
Expected<void> askProcessCount(Session& s) {
  if (!s.multi()) {
    s.config.num_processes = 1;
    return {};
  }
  const std::string what = s.machine == kMachineMultiCpu ? "processes" : "GPU(s)";
  ACCEL_ASK(processes, s.ask.integer("How many " + what + " should be used for distributed training, in total over all "
                                     "machines?",
                                     1, checkProcessCount(s.config.num_machines, s.machine == kMachineMultiGpu)));
  s.config.num_processes = processes;
  return {};
}

// Which GPUs, for a job that uses them.
Expected<void> askGpus(Session& s) {
  if (!(s.machine == kMachineMultiGpu || s.machine == kMachineNo) || s.config.use_cpu) return {};
  ACCEL_ASK(ids, s.ask.text("What GPU(s) (by id) should be used for training on this machine as a comma-separated "
                            "list?",
                            std::string("all"), checkGpuIds));
  s.config.gpu_ids = ids;
  ACCEL_ASK(numa, s.ask.yesNo("Would you like to enable numa efficiency? (Currently only supported on NVIDIA "
                              "hardware).",
                              false));
  s.config.enable_cpu_affinity = numa;
  return {};
}

Expected<void> askPrecision(Session& s) {
  ACCEL_ASK(precision,
            s.ask.menu("Do you wish to use mixed precision?", kPrecisions, 0, checkPrecision(s.config.use_cpu)));
  s.config.mixed_precision = kPrecisions[precision];
  return {};
}

}  // namespace

Expected<ClusterConfig> runQuestionnaire(std::istream& in, std::ostream& out, const PathEnv& env) {
  Prompter ask(in, out);
  Session s{ask, env, ClusterConfig{}};
  for (auto section : {askEnvironment, askMachineType, askMachines, askCpuOnly, askMpirun, askDynamo, askProcessCount,
                       askGpus, askPrecision}) {
    if (auto ok = section(s); !ok) return std::move(ok).takeError();
  }
  addAccelerateDefaults(s.config);
  return std::move(s.config);
}

}  // namespace accel::config
