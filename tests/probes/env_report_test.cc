#include "probes/env_report.h"

#include <gtest/gtest.h>

#include "python_info.h"

namespace accel::probes {
namespace {

using testing::pythonInfo;

EnvReport sampleReport() {
  EnvReport r;
  r.build = BuildInfo{"0.1.0", "abc123", "GCC 12.2.0", "Release", "1.13.0", true};
  r.accel_path = "/usr/bin/accel";
  r.system.os = "Debian GNU/Linux 12 (bookworm)";
  r.system.kernel = "Linux 6.1.0";
  r.system.machine = "x86_64";
  r.system.hostname = "node1";
  r.system.cpu_model = "AMD EPYC";
  r.system.logical_cpus = 8;
  r.system.usable_cpus = 4;
  r.system.physical_cores = 4;
  r.system.ram_gib = 31.25;
  r.gpus.cuda_usable = true;
  r.gpus.cuda_status = "ok";
  r.gpus.driver_cuda_version = 13000;
  r.gpus.driver_version = "580.65.06";
  r.gpus.devices = {{0, "NVIDIA H100 80GB HBM3", 85899345920ull, ""}};
  r.gpus.nccl_version = "2.28.9";
  r.gpus.nccl_status = "ok";
  r.pythons = {pythonInfo("python3", "/usr/bin/python3", "3.11.2", std::string("1.13.0a0"), ""),
               pythonInfo("python9", "", "", std::nullopt, "'python9' not found in PATH")};
  r.config.path = "/home/u/.cache/huggingface/accelerate/default_config.yaml";
  r.config.values = {{"distributed_type", "MULTI_GPU"},
                     {"num_processes", 2},
                     {"use_cpu", false},
                     {"tpu_env", nlohmann::json::array()}};
  return r;
}

TEST(EnvReportTest, TextHasOneLinePerFact) {
  std::string text = renderEnvText(sampleReport());
  for (const char* line : {
           "- `accel` version: 0.1.0 (git abc123, Release)\n",
           "- Platform: Debian GNU/Linux 12 (bookworm) (Linux 6.1.0, x86_64)\n",
           "- CPU: AMD EPYC; 8 logical CPUs (4 usable by this process), 4 physical cores\n",
           "- System RAM: 31.25 GB\n",
           "- LibTorch version (built against): 1.13.0\n",
           "- CUDA usable: yes\n",
           "- CUDA driver API version: 13.0\n",
           "- NVIDIA driver version: 580.65.06\n",
           "- GPU count: 1\n",
           "- GPU 0: NVIDIA H100 80GB HBM3, 80.00 GB\n",
           "- NCCL on this machine (libnccl.so.2, loaded at run time): 2.28.9\n",
           "- NCCL in libaccel (C++ workers): built in: GPU ranks all-reduce with NCCL\n",
           "- Python (python3): 3.11.2 at /usr/bin/python3, torch 1.13.0a0\n",
           "- Python (python9): unavailable ('python9' not found in PATH)\n",
           "- `accel` default config: /home/u/.cache/huggingface/accelerate/default_config.yaml\n",
           "\t- distributed_type: MULTI_GPU\n\t- num_processes: 2\n\t- tpu_env: []\n\t- use_cpu: "
           "False\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << text;
  }
}

// Without NCCL at build time and none on the loader path: each half of the NCCL facts says
// what it is about.
TEST(EnvReportTest, NcclLinesSayWhatEachMeans) {
  EnvReport r = sampleReport();
  r.build.with_nccl = false;
  r.gpus.nccl_version.reset();
  r.gpus.nccl_status = "libnccl.so.2 not found";
  const std::string text = renderEnvText(r);
  EXPECT_NE(text.find("- NCCL on this machine (libnccl.so.2, loaded at run time): not found "
                      "(libnccl.so.2 not found)\n"
                      "- NCCL in libaccel (C++ workers): not built in (no NCCL at build time): "
                      "C++ workers communicate through the CPU (Gloo or shared memory); torch's "
                      "own NCCL is unaffected\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("NCCL version"), std::string::npos) << text;
}

TEST(EnvReportTest, SchedulerLine) {
  EnvReport r = sampleReport();
  EXPECT_NE(renderEnvText(r).find("- Scheduler: none (a static launch)\n"), std::string::npos);
  EXPECT_TRUE(renderEnvJson(r).at("scheduler").is_null());
  auto info =
      detectScheduler({"SLURM_JOB_ID=42", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n[1-2]",
                       "SLURM_NNODES=2", "SLURM_NODEID=1", "SLURM_NTASKS=2", "SLURM_PROCID=1",
                       "SLURM_LOCALID=0", "SLURM_GPUS_ON_NODE=4", "SLURM_CPUS_ON_NODE=32"});
  ASSERT_TRUE(info) << info.error();
  r.scheduler = **info;
  EXPECT_NE(renderEnvText(r).find(
                "- Scheduler: SLURM job 42: node 1 of 2 (master n1), task 1 of 2 (local 0 of 1), "
                "4 GPU(s), 32 CPU(s) on this node\n"),
            std::string::npos)
      << renderEnvText(r);
  auto j = renderEnvJson(r).at("scheduler");
  EXPECT_EQ(j.at("name"), "SLURM");
  EXPECT_EQ(j.at("hosts"), nlohmann::json({"n1", "n2"}));
  EXPECT_EQ(j.at("node_rank"), 1);
  r.scheduler.reset();
  r.scheduler_error = "SLURM_NODEID='x' is not a non-negative integer";
  EXPECT_NE(renderEnvText(r).find("- Scheduler: malformed (SLURM_NODEID='x'"), std::string::npos);
}

TEST(EnvReportTest, MissingConfigSaysNotFound) {
  EnvReport r = sampleReport();
  r.config = ConfigSection{};
  EXPECT_NE(renderEnvText(r).find("- `accel` default config:\n\tNot found\n"), std::string::npos);
}

TEST(EnvReportTest, JsonHasDocumentedFields) {
  auto j = renderEnvJson(sampleReport());
  EXPECT_EQ(j.at("accel").at("version"), "0.1.0");
  EXPECT_EQ(j.at("cpu").at("logical_cpus"), 8);
  EXPECT_EQ(j.at("cuda").at("gpu_count"), 1);
  EXPECT_EQ(j.at("cuda").at("devices").at(0).at("memory_bytes"), 85899345920ull);
  EXPECT_EQ(j.at("nccl").at("version"), "2.28.9");
  EXPECT_EQ(j.at("libtorch").at("version"), "1.13.0");
  EXPECT_EQ(j.at("python").at(0).at("torch"), "1.13.0a0");
  EXPECT_TRUE(j.at("python").at(1).at("torch").is_null());
  EXPECT_EQ(j.at("config").at("values").at("num_processes"), 2);
  EXPECT_TRUE(j.at("config").at("error").is_null());
}

}  // namespace
}  // namespace accel::probes
