#include "probes/preflight.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <gtest/gtest.h>

#include "libaccel/store/wire_protocol.h"
#include "python_info.h"

namespace accel::probes {
namespace {

using testing::pythonInfo;

// EXPECT_HAS(text, part): `part` occurs in `text`, else both are printed.
#define EXPECT_HAS(text, part)                               \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (part) << "' not in: " << (text)

ConfigFacts facts(const std::string& yamlLike) {
  ConfigFacts f;
  f.path = "/c.yaml";
  config::ClusterConfig c;
  // A few keys are enough here: "type processes machines rank".
  char type[32] = {0};
  int processes = 1, machines = 1, rank = 0;
  std::sscanf(yamlLike.c_str(), "%31s %d %d %d", type, &processes, &machines, &rank);
  c.distributed_type = type;
  c.num_processes = processes;
  c.num_machines = machines;
  c.machine_rank = rank;
  f.config = c;
  return f;
}

GpuInfo gpus(int n, int driverCuda = 12040, bool nccl = true) {
  GpuInfo g;
  g.cuda_usable = n > 0;
  g.cuda_status = n > 0 ? "ok" : "no NVIDIA driver (libcuda.so.1 not found)";
  if (n > 0) g.driver_cuda_version = driverCuda;
  g.driver_version = "550.54";
  for (int i = 0; i < n; ++i) g.devices.push_back({i, "H100", 80ull << 30, ""});
  if (nccl) g.nccl_version = "2.21.5";
  g.nccl_status = nccl ? "ok" : "libnccl.so.2 not found";
  return g;
}

TEST(PreflightRules, FdsNeededIs256PlusFourPerRank) {
  EXPECT_EQ(fdsNeeded(1), 260u);
  EXPECT_EQ(fdsNeeded(0), 260u);  // an unset world size counts as one rank
  EXPECT_EQ(fdsNeeded(192), 1024u);
  EXPECT_EQ(fdsNeeded(1024), 4352u);
}

TEST(PreflightRules, UlimitWarnsBelowTheRuleWithTheCommand) {
  auto f = facts("MULTI_GPU 256 32");
  auto low = checkUlimit(f, 1024);
  EXPECT_EQ(low.status, CheckStatus::Warn);
  EXPECT_HAS(low.finding, "1024 is below 1280 (256 + 4 per rank) for 256 ranks");
  EXPECT_HAS(low.fix, "`ulimit -n 1280`");
  EXPECT_EQ(checkUlimit(f, 1280).status, CheckStatus::Ok);
  EXPECT_EQ(checkUlimit(facts("MULTI_GPU 192"), 1024).status, CheckStatus::Ok);
}

TEST(PreflightRules, ParsesTorchAndCudaVersions) {
  EXPECT_EQ(parseMajorMinor("2.6.0+cu124"), std::make_pair(2, 6));
  EXPECT_EQ(parseMajorMinor("1.13.1a0+git"), std::make_pair(1, 13));
  EXPECT_EQ(parseMajorMinor("1.13.0a0"), std::make_pair(1, 13));
  EXPECT_EQ(parseMajorMinor("2.11"), std::make_pair(2, 11));
  EXPECT_EQ(parseMajorMinor("2.6rc1"), std::make_pair(2, 6));
  EXPECT_FALSE(parseMajorMinor(""));
  EXPECT_FALSE(parseMajorMinor("2"));
  EXPECT_FALSE(parseMajorMinor("two.six"));
  EXPECT_FALSE(parseMajorMinor("2.6x"));
  EXPECT_EQ(torchCudaVersion("2.6.0+cu124"), "12.4");
  EXPECT_EQ(torchCudaVersion("2.1.0+cu118"), "11.8");
  EXPECT_FALSE(torchCudaVersion("2.6.0+cpu"));
  EXPECT_FALSE(torchCudaVersion("2.6.0"));
  EXPECT_FALSE(torchCudaVersion("2.6.0+cu12x"));
  EXPECT_EQ(cudaVersionCode("12.4"), 12040);
  EXPECT_EQ(cudaVersionCode("13.0"), 13000);
  EXPECT_FALSE(cudaVersionCode(""));
}

// The range the python item accepts is the store's generation table, not a guess.
TEST(PreflightRules, ServedTorchRangeMatchesTheStoresGenerationTable) {
  std::vector<std::pair<int, int>> releases;
  for (const auto& g : store::wire::generations()) {
    std::string text = g.releases;  // "1.13, 2.0", "2.1", "2.2 - 2.14"
    std::replace(text.begin(), text.end(), ',', ' ');
    std::replace(text.begin(), text.end(), '-', ' ');
    std::istringstream words(text);
    for (std::string w; words >> w;) {
      auto mm = parseMajorMinor(w);
      ASSERT_TRUE(mm) << "unparsed release '" << w << "' in " << g.releases;
      releases.push_back(*mm);
    }
  }
  ASSERT_FALSE(releases.empty());
  EXPECT_EQ(*std::min_element(releases.begin(), releases.end()), kOldestServedTorch);
  EXPECT_EQ(*std::max_element(releases.begin(), releases.end()), kNewestServedTorch);
  EXPECT_FALSE(storeServesTorch({1, 12}));
  EXPECT_TRUE(storeServesTorch({1, 13}));
  EXPECT_TRUE(storeServesTorch({2, 0}));
  EXPECT_TRUE(storeServesTorch({2, 14}));
  EXPECT_FALSE(storeServesTorch({2, 15}));
}

TEST(PreflightChecks, GpusAgainstTheConfig) {
  auto none = checkGpus(facts("MULTI_GPU 4"), gpus(0));
  EXPECT_EQ(none.status, CheckStatus::Fail);
  EXPECT_HAS(none.finding, "MULTI_GPU with 4 processes on this machine, but 0 GPUs are usable");
  EXPECT_HAS(none.fix, "--cpu");

  auto tooMany = checkGpus(facts("FSDP 4"), gpus(2));
  EXPECT_EQ(tooMany.status, CheckStatus::Fail);
  EXPECT_HAS(tooMany.finding, "4 processes on this machine but 2 GPUs found");
  EXPECT_HAS(tooMany.fix, "lower num_processes to 2");

  auto f = facts("MULTI_GPU 2");
  f.config->gpu_ids = "0,5";
  auto absent = checkGpus(f, gpus(4));
  EXPECT_EQ(absent.status, CheckStatus::Fail);
  EXPECT_HAS(absent.finding, "gpu_ids names GPU 5, which does not exist here (4 GPUs)");
  f.config->gpu_ids = "0,x";
  EXPECT_HAS(checkGpus(f, gpus(4)).finding, "gpu_ids entry 'x' is not a GPU index");
  f.config->gpu_ids = "1";
  auto fewerIds = checkGpus(f, gpus(4));
  EXPECT_EQ(fewerIds.status, CheckStatus::Fail);
  EXPECT_HAS(fewerIds.finding, "2 processes on this machine but 1 GPU allowed by gpu_ids 1");
  f.config->gpu_ids = "2,3";
  EXPECT_EQ(checkGpus(f, gpus(4)).status, CheckStatus::Ok);

  EXPECT_EQ(checkGpus(facts("MULTI_GPU 8 2"), gpus(4)).status, CheckStatus::Ok);  // 4 per machine
  auto cpu = checkGpus(facts("MULTI_CPU 4"), gpus(0));
  EXPECT_EQ(cpu.status, CheckStatus::Ok);
  EXPECT_HAS(cpu.finding, "CPU job (4 processes here)");
  auto useCpu = facts("MULTI_GPU 4");
  useCpu.config->use_cpu = true;
  EXPECT_EQ(checkGpus(useCpu, gpus(0)).status, CheckStatus::Ok);
  auto fp16 = facts("NO 1");
  fp16.config->mixed_precision = "fp16";
  EXPECT_EQ(checkGpus(fp16, gpus(0)).status, CheckStatus::Fail);
}

TEST(PreflightChecks, DriverAgainstBuildAndTorchCuda) {
  PythonInfo py;
  py.torch = "2.6.0+cu124";
  auto f = facts("MULTI_GPU 2");
  EXPECT_EQ(checkDriver(f, gpus(2, 12040), "12.4", py).status, CheckStatus::Ok);
  auto oldForBuild = checkDriver(f, gpus(2, 12020), "12.4", {});
  EXPECT_EQ(oldForBuild.status, CheckStatus::Fail);
  EXPECT_HAS(oldForBuild.finding, "(CUDA 12.2) is older than the CUDA 12.4 accel was built with");
  auto oldForTorch = checkDriver(f, gpus(2, 12020), "", py);
  EXPECT_EQ(oldForTorch.status, CheckStatus::Fail);
  EXPECT_HAS(oldForTorch.finding, "older than the CUDA 12.4 torch 2.6.0+cu124 was built with");
  auto noNccl = checkDriver(f, gpus(2, 12040, false), "", {});
  EXPECT_EQ(noNccl.status, CheckStatus::Warn);
  EXPECT_HAS(noNccl.finding, "libnccl.so.2 not found");
  EXPECT_EQ(checkDriver(facts("MULTI_CPU 2"), gpus(0), "12.4", py).status, CheckStatus::Ok);
  auto noDriver = checkDriver(f, gpus(0), "", py);
  EXPECT_EQ(noDriver.status, CheckStatus::Fail);
  EXPECT_HAS(noDriver.finding, "libcuda.so.1 not found");
}

TEST(PreflightChecks, PortOnlyOnMachineZeroAndOnlyWhenSet) {
  int asked = 0;
  NetworkProbes net;
  net.port_free = [&](int port) -> Expected<void> {
    ++asked;
    return makeError(
        "--main_process_port: port " + std::to_string(port) +
        " is already in use by pid 42 (python3); choose another port or omit it to get a free one");
  };
  auto f = facts("MULTI_CPU 2");
  f.config->main_process_port = 29500;
  auto taken = checkPort(f, net);
  EXPECT_EQ(taken.status, CheckStatus::Fail);
  EXPECT_EQ(taken.finding, "port 29500 is already in use by pid 42 (python3) (/c.yaml)");
  EXPECT_HAS(taken.fix, "0 or unset: launch picks a free one");
  EXPECT_EQ(asked, 1);

  f.config->main_process_port = 0;
  EXPECT_EQ(checkPort(f, net).status, CheckStatus::Ok);
  auto rank1 = facts("MULTI_CPU 4 2 1");
  rank1.config->main_process_port = 29500;
  EXPECT_EQ(checkPort(rank1, net).status, CheckStatus::Ok);
  EXPECT_EQ(asked, 1);  // neither asked the system
  EXPECT_EQ(checkPort(facts("MULTI_CPU 4 2"), net).status,
            CheckStatus::Fail);  // several machines, no port
}

TEST(PreflightChecks, NetworkWithSeveralMachines) {
  NetworkProbes net;
  net.route = [](const std::string&) -> Expected<std::string> {
    return std::string("eth0 (10.0.0.2)");
  };
  net.reach = [](const std::string&, int) -> Expected<void> { return {}; };
  HostFacts host{"node1", {"10.0.0.2"}, ""};
  auto f = facts("MULTI_GPU 16 2 1");
  f.config->main_process_ip = "10.0.0.1";
  f.config->main_process_port = 29500;
  auto good = checkNetwork(f, host, net);
  EXPECT_EQ(good.status, CheckStatus::Ok) << good.finding;
  EXPECT_HAS(good.finding, "master 10.0.0.1:29500 answers via eth0 (10.0.0.2)");

  auto loop = checkNetwork(f, HostFacts{"node1", {"::1", "127.0.1.1"}, ""}, net);
  EXPECT_EQ(loop.status, CheckStatus::Warn);
  EXPECT_HAS(loop.fix, "/etc/hosts");
  EXPECT_EQ(checkNetwork(f, HostFacts{"node1", {}, "Name or service not known"}, net).status,
            CheckStatus::Warn);

  net.reach = [](const std::string&, int) -> Expected<void> {
    return makeError("connection refused");
  };
  auto later = checkNetwork(f, host, net);
  EXPECT_EQ(later.status, CheckStatus::Warn);
  EXPECT_HAS(later.finding, "is not reachable yet: connection refused");
  net.route = [](const std::string&) -> Expected<std::string> {
    return makeError("cannot resolve 'x'");
  };
  EXPECT_EQ(checkNetwork(f, host, net).status, CheckStatus::Fail);

  f.config->main_process_ip.reset();
  EXPECT_EQ(checkNetwork(f, host, net).status, CheckStatus::Fail);
  EXPECT_EQ(checkNetwork(facts("MULTI_GPU 8"), HostFacts{"x", {}, "no"}, net).status,
            CheckStatus::Ok);  // one machine
}

TEST(PreflightChecks, ShmAndPython) {
  EXPECT_EQ(checkShm(512ull << 20).status, CheckStatus::Warn);
  EXPECT_HAS(checkShm(64ull << 20).fix, "--shm-size");
  EXPECT_EQ(checkShm(std::nullopt).status, CheckStatus::Warn);
  EXPECT_EQ(checkShm(1ull << 30).status, CheckStatus::Ok);

  PythonInfo p = pythonInfo("python3", "/usr/bin/python3", "3.11.2", std::nullopt, "");
  EXPECT_EQ(checkPython(p).status, CheckStatus::Warn);
  p.torch = "1.12.1";
  EXPECT_EQ(checkPython(p).status, CheckStatus::Fail);
  p.torch = "2.15.0";
  EXPECT_EQ(checkPython(p).status, CheckStatus::Warn);
  p.torch = "2.6.0+cu124";
  EXPECT_EQ(checkPython(p).status, CheckStatus::Ok);
  p.error = "'python3' not found in PATH";
  EXPECT_EQ(checkPython(p).status, CheckStatus::Warn);
}

// An interpreter without torch when another here has it (as `accel env` lists): the fix names
// that one, not "one that has torch".
TEST(PreflightChecks, PythonWithoutTorchFixNamesTheOneThatHasIt) {
  PythonInfo pyenv =
      pythonInfo("python3", "/root/.pyenv/versions/3.11.7/bin/python3", "3.11.7", std::nullopt, "");
  PythonInfo debian = pythonInfo("/usr/bin/python3", "/usr/bin/python3", "3.11.2", "1.13.0a0", "");
  CheckItem item = checkPython(pyenv, debian);
  EXPECT_EQ(item.status, CheckStatus::Warn);
  EXPECT_EQ(item.fix,
            "/usr/bin/python3 has torch 1.13.0a0: launch with --python /usr/bin/python3 (or "
            "PYTHON_EXEC=/usr/bin/python3), or pip install torch into it");
  EXPECT_EQ(checkPython(pyenv).fix,
            "pip install torch into it, or point launch at one that has torch (--python or "
            "$PYTHON_EXEC)");
  PythonInfo missing =
      pythonInfo("python3.12", "", "", std::nullopt, "'python3.12' not found in PATH");
  EXPECT_EQ(checkPython(missing, debian).fix,
            "/usr/bin/python3 has torch 1.13.0a0: launch with --python /usr/bin/python3 (or "
            "PYTHON_EXEC=/usr/bin/python3), or install python3 with torch");
}

TEST(PreflightChecks, BadConfigFailsAndTheItemsThatNeedItSaySo) {
  ConfigFacts bad;
  bad.path = "/c.yaml";
  bad.error = "/c.yaml:2:1: unknown key 'num_procesess'; did you mean 'num_processes'?";
  auto item = checkConfigFile(bad);
  EXPECT_EQ(item.status, CheckStatus::Fail);
  EXPECT_EQ(item.finding, bad.error);
  EXPECT_EQ(checkGpus(bad, gpus(0)).status, CheckStatus::Warn);
  EXPECT_HAS(checkUlimit(bad, 1024).finding, "not checked");
}

TEST(PreflightRender, TextAndJson) {
  std::vector<CheckItem> items{{"shm", CheckStatus::Ok, "/dev/shm is 2.00 GiB", ""},
                               {"port", CheckStatus::Fail, "port 1 is in use", "pick another"}};
  EXPECT_EQ(renderPreflightText(items),
            "OK    shm: /dev/shm is 2.00 GiB\n"
            "FAIL  port: port 1 is in use\n"
            "      fix: pick another\n"
            "preflight failed: 1 failure, 0 warnings\n");
  auto j = renderPreflightJson(items);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["items"][1]["status"], "FAIL");
  EXPECT_EQ(j["items"][1]["fix"], "pick another");
  items.pop_back();
  EXPECT_TRUE(preflightOk(items));
}

}  // namespace
}  // namespace accel::probes

namespace accel::probes {
namespace {

// ldd's line for torch's libblas.so.3, resolved through the alternatives to the library behind.
BlasInfo blasBehind(const std::string& real) {
  return classifyBlas(
      "\tlibtorch_cpu.so.1.13 => /lib/x86_64-linux-gnu/libtorch_cpu.so.1.13 (0x00007f1)\n"
      "\tlibblas.so.3 => /lib/x86_64-linux-gnu/libblas.so.3 (0x00007f2)\n",
      [&](const std::string& path) {
        EXPECT_EQ(path, "/lib/x86_64-linux-gnu/libblas.so.3");
        return real;
      });
}

TEST(BlasProbe, NamesTheLibraryBehindLibblas) {
  BlasInfo ref = blasBehind("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  EXPECT_EQ(ref.kind, "reference");
  EXPECT_TRUE(ref.slow());
  EXPECT_EQ(describeBlas(ref),
            "reference BLAS (netlib, /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0): slow");
  BlasInfo open = blasBehind("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  EXPECT_EQ(open.kind, "OpenBLAS");
  EXPECT_FALSE(open.slow());
  EXPECT_EQ(describeBlas(open),
            "OpenBLAS (/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)");
  EXPECT_EQ(blasBehind("/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3").kind, "BLIS");
  BlasInfo odd = blasBehind("/opt/vendor/libblas.so.3");
  EXPECT_EQ(odd.kind, "");
  EXPECT_EQ(describeBlas(odd),
            "unknown (libblas.so.3 is /opt/vendor/libblas.so.3, not one accel knows)");
}

TEST(BlasProbe, AWheelsOwnBlasOrNone) {
  auto same = [](const std::string& p) { return p; };
  BlasInfo wheel = classifyBlas(
      "\tlibopenblasp-r0-2ecf47d5.3.21.so => /x/torch/lib/libopenblasp-r0-2ecf47d5.3.21.so (0x1)\n",
      same);
  EXPECT_EQ(wheel.kind, "OpenBLAS");
  EXPECT_EQ(wheel.library, "/x/torch/lib/libopenblasp-r0-2ecf47d5.3.21.so");
  BlasInfo linkedIn = classifyBlas("\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n", same);
  EXPECT_EQ(linkedIn.kind, "built in");
  EXPECT_EQ(describeBlas(linkedIn), "built into torch");
}

// Debian's torch on this machine: the probe finds the library the alternatives point to.
TEST(BlasProbe, DebiansTorchLoadsWhatTheAlternativesSay) {
  const std::string torchDir = "/usr/lib/python3/dist-packages/torch";
  if (::access(torchDir.c_str(), R_OK) != 0) GTEST_SKIP() << "no Debian python3-torch here";
  char* real = ::realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3", nullptr);
  ASSERT_NE(real, nullptr);
  const std::string expected = real;
  ::free(real);
  BlasInfo blas = probeTorchBlas(torchDir);
  EXPECT_EQ(blas.error, "");
  EXPECT_EQ(blas.library, expected);
  EXPECT_NE(blas.kind, "");
}

TEST(PreflightChecks, TheReferenceBlasIsAWarningWithItsFix) {
  PythonInfo py = pythonInfo("/usr/bin/python3", "/usr/bin/python3", "3.11.2", "1.13.0a0", "");
  EXPECT_EQ(checkBlas(py).finding, "no torch to look at");
  py.blas = blasBehind("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  CheckItem item = checkBlas(py);
  EXPECT_EQ(item.status, CheckStatus::Warn);
  EXPECT_EQ(item.finding,
            "torch under /usr/bin/python3 runs its matrix products on the reference BLAS (netlib, "
            "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0): slow (fp32 training about 17x "
            "slower than on OpenBLAS)");
  EXPECT_EQ(item.fix.rfind("sudo apt install libopenblas0-pthread", 0), 0u);
  py.blas = blasBehind("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  EXPECT_EQ(checkBlas(py).status, CheckStatus::Ok);
}

}  // namespace
}  // namespace accel::probes
