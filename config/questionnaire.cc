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

// Propagates a prompter error out of the enclosing function.
#define ACCEL_ASK(var, expr)                          \
  auto var##_answer = (expr);                         \
  if (!var##_answer) return std::move(var##_answer).takeError(); \
  auto var = *var##_answer

}  // namespace

Expected<ClusterConfig> runQuestionnaire(std::istream& in, std::ostream& out, const PathEnv& env) {
  Prompter ask(in, out);
  ClusterConfig c;

  ACCEL_ASK(environment, ask.menu("In which compute environment are you running?",
                                  {"This machine", "AWS (Amazon SageMaker)"}, 0, [](const int& i) {
                                    return i == 1 ? std::optional<std::string>(
                                                        "AWS (Amazon SageMaker) is not supported by accel; choose 0")
                                                  : std::nullopt;
                                  }));
  (void)environment;

  ACCEL_ASK(machine, ask.menu("Which type of machine are you using?", kMachineTypes, 0, [](const int& i) {
    if (i == kMachineNo || i == kMachineMultiCpu || i == kMachineMultiGpu) return std::optional<std::string>();
    return std::optional<std::string>(kMachineTypes[i] +
                                      " is not supported by accel; choose 0 (No distributed training), "
                                      "1 (multi-CPU) or 4 (multi-GPU)");
  }));
  const bool multi = machine != kMachineNo;
  c.distributed_type = machine == kMachineNo         ? std::string(kDistributedNo)
                       : machine == kMachineMultiCpu ? std::string(kDistributedMultiCpu)
                                                     : std::string(kDistributedMultiGpu);
  c.same_network = true;

  if (multi) {
    ACCEL_ASK(machines, ask.integer("How many different machines will you use (use more than 1 for multi-node training)?", 1,
                                    [](const int& n) {
                                      return n >= 1 ? std::nullopt : std::optional<std::string>("must be at least 1");
                                    }));
    c.num_machines = machines;
    if (machines > 1) {
      ACCEL_ASK(rank, ask.integer("What is the rank of this machine (0 to " + std::to_string(machines - 1) + ")?", 0,
                                  [machines](const int& r) {
                                    return r >= 0 && r < machines
                                               ? std::nullopt
                                               : std::optional<std::string>("must be between 0 and " +
                                                                            std::to_string(machines - 1));
                                  }));
      c.machine_rank = rank;
      ACCEL_ASK(ip, ask.text("What is the IP address of the machine that will host the main process?", std::nullopt,
                             [](const std::string& s) {
                               if (s.empty()) return std::optional<std::string>("an address or host name is required");
                               if (s.find_first_of(" \t/") != std::string::npos) {
                                 return std::optional<std::string>("'" + s + "' is not a host name or IP address");
                               }
                               return std::optional<std::string>();
                             }));
      c.main_process_ip = ip;
      ACCEL_ASK(port, ask.integer("What is the port you will use to communicate with the main process?", 29500,
                                  [](const int& p) {
                                    return p >= 1 && p <= 65535 ? std::nullopt
                                                                : std::optional<std::string>("must be between 1 and 65535");
                                  }));
      c.main_process_port = port;
      ACCEL_ASK(sameNetwork, ask.yesNo("Are all the machines on the same local network? Answer `no` if nodes are on "
                                       "the cloud and/or on different network hosts",
                                       true));
      c.same_network = sameNetwork;
      if (!sameNetwork) {
        ACCEL_ASK(backend, ask.text("What rendezvous backend will you use? ('static', 'c10d', ...)", std::string("static"),
                                    [](const std::string& s) {
                                      const auto& choices = findField("rdzv_backend")->choices;
                                      for (auto ch : choices) {
                                        if (ch == s) return std::optional<std::string>();
                                      }
                                      return std::optional<std::string>("'" + s + "' is not one of " + joinChoices(choices));
                                    }));
        c.rdzv_backend = backend;
      }
    }
    ACCEL_ASK(debug, ask.yesNo("Should distributed operations be checked while running for errors? This can avoid "
                               "timeout issues but will be slower.",
                               false));
    c.debug = debug;
  }

  if (machine == kMachineNo) {
    ACCEL_ASK(cpuOnly, ask.yesNo("Do you want to run your training on CPU only (even if a GPU / Apple Silicon / Ascend "
                                 "NPU device is available)?",
                                 false));
    c.use_cpu = cpuOnly;
  } else {
    c.use_cpu = machine == kMachineMultiCpu;
  }

  if (machine == kMachineMultiCpu) {
    ACCEL_ASK(mpirun, ask.yesNo("Do you want accelerate to launch mpirun?", false));
    if (mpirun) {
      ACCEL_ASK(hostfile, ask.text("Please enter the path to the hostfile to use with mpirun", std::string("~/hostfile")));
      c.extras["mpirun_config"] = json{{"mpirun_hostfile", expandUser(hostfile, env)}};
    }
  }

  ACCEL_ASK(dynamo, ask.yesNo("Do you wish to optimize your script with torch dynamo?", false));
  if (dynamo) {
    json section;
    ACCEL_ASK(backend, ask.menu("Which dynamo backend would you like to use?", kDynamoBackends, 2));
    section["dynamo_backend"] = upper(kDynamoBackends[backend]);
    ACCEL_ASK(customize, ask.yesNo("Do you want to customize the defaults sent to torch.compile?", false));
    if (customize) {
      ACCEL_ASK(mode, ask.menu("Which mode do you want to use?", kDynamoModes, 0));
      section["dynamo_mode"] = kDynamoModes[mode];
      ACCEL_ASK(fullgraph, ask.yesNo("Do you want the fullgraph mode or it is ok to break model into several subgraphs?", false));
      section["dynamo_use_fullgraph"] = fullgraph;
      ACCEL_ASK(dynamic, ask.yesNo("Do you want to enable dynamic shape tracing?", false));
      section["dynamo_use_dynamic"] = dynamic;
      ACCEL_ASK(regional, ask.yesNo("Do you want to enable regional compilation?", false));
      section["dynamo_use_regional_compilation"] = regional;
    }
    c.extras["dynamo_config"] = section;
  }

  if (multi) {
    const std::string what = machine == kMachineMultiCpu ? "processes" : "GPU(s)";
    const int machines = c.num_machines;
    const bool gpu = machine == kMachineMultiGpu;
    ACCEL_ASK(processes, ask.integer("How many " + what + " should be used for distributed training, in total over all "
                                     "machines?",
                                     1, [machines, gpu](const int& n) -> std::optional<std::string> {
                                       if (n < 1) return "must be at least 1";
                                       if (n < machines || n % machines != 0) {
                                         return "the total must be a multiple of the number of machines (" +
                                                std::to_string(machines) + ")";
                                       }
                                       if (gpu && machines == 1 && n == 1) {
                                         return "multi-GPU on one machine needs at least 2 GPUs; for one GPU choose "
                                                "'No distributed training'";
                                       }
                                       return std::nullopt;
                                     }));
    c.num_processes = processes;
  } else {
    c.num_processes = 1;
  }

  if ((machine == kMachineMultiGpu || machine == kMachineNo) && !c.use_cpu) {
    ACCEL_ASK(ids, ask.text("What GPU(s) (by id) should be used for training on this machine as a comma-separated list?",
                            std::string("all"), [](const std::string& s) { return checkGpuIds(s); }));
    c.gpu_ids = ids;
    ACCEL_ASK(numa, ask.yesNo("Would you like to enable numa efficiency? (Currently only supported on NVIDIA hardware).",
                              false));
    c.enable_cpu_affinity = numa;
  }

  const bool cpu = c.use_cpu;
  ACCEL_ASK(precision, ask.menu("Do you wish to use mixed precision?", kPrecisions, 0, [cpu](const int& i) {
    if (kPrecisions[i] == "fp8") return std::optional<std::string>("fp8 is not supported by accel; choose no, fp16 or bf16");
    if (kPrecisions[i] == "fp16" && cpu) {
      return std::optional<std::string>("fp16 needs a GPU (accel does not fake it in fp32 on CPU); choose no or bf16");
    }
    return std::optional<std::string>();
  }));
  c.mixed_precision = kPrecisions[precision];

  addAccelerateDefaults(c);
  return c;
}

}  // namespace accel::config
