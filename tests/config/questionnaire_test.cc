#include "config/questionnaire.h"

#include <sstream>

#include <gtest/gtest.h>

namespace accel::config {
namespace {

struct Run {
  Expected<ClusterConfig> result;
  std::string transcript;
};

Run answer(const std::string& answers) {
  std::istringstream in(answers);
  std::ostringstream out;
  PathEnv env{std::nullopt, std::nullopt, "/home/u"};
  auto result = runQuestionnaire(in, out, env);
  return Run{std::move(result), out.str()};
}

TEST(QuestionnaireTest, AllDefaultsIsOneProcessNoPrecision) {
  // environment, machine type, cpu only, dynamo, gpu ids, numa, precision
  auto run = answer("\n\n\n\n\n\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(c.distributed_type, "NO");
  EXPECT_EQ(c.num_processes, 1);
  EXPECT_EQ(c.gpu_ids, "all");
  EXPECT_FALSE(c.use_cpu);
  EXPECT_EQ(c.mixed_precision, "no");
  EXPECT_EQ(c.extras.at("downcast_bf16"), "no");
}

TEST(QuestionnaireTest, MultiCpuMatchesAccelerateExample) {
  // This machine; multi-CPU; 1 machine; debug no; mpirun no; dynamo no; 4 processes; no precision.
  auto run = answer("0\n1\n1\nno\nno\nno\n4\n0\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(c.distributed_type, "MULTI_CPU");
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_TRUE(c.use_cpu);
  EXPECT_TRUE(c.same_network);
  EXPECT_FALSE(c.gpu_ids.has_value());
}

TEST(QuestionnaireTest, MultiNodeGpuAsksRankAddressPortNetwork) {
  // multi-GPU; 2 machines; rank 1; ip; port; same network no; rdzv c10d; debug y; dynamo y with
  // inductor, customised; 16 GPUs; ids 0,1; numa yes; bf16.
  auto run = answer(
      "0\n4\n2\n1\n10.0.0.1\n29501\nno\nc10d\ny\n"
      "y\n2\ny\n1\nn\ny\nn\n"
      "16\n0,1\nyes\nbf16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(c.distributed_type, "MULTI_GPU");
  EXPECT_EQ(c.num_machines, 2);
  EXPECT_EQ(c.machine_rank, 1);
  EXPECT_EQ(c.main_process_ip, "10.0.0.1");
  EXPECT_EQ(c.main_process_port, 29501);
  EXPECT_FALSE(c.same_network);
  EXPECT_EQ(c.rdzv_backend, "c10d");
  EXPECT_TRUE(c.debug);
  EXPECT_EQ(c.num_processes, 16);
  EXPECT_EQ(c.gpu_ids, "0,1");
  EXPECT_TRUE(c.enable_cpu_affinity);
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_EQ(c.extras.at("dynamo_config"),
            (nlohmann::json{{"dynamo_backend", "INDUCTOR"},
                            {"dynamo_mode", "reduce-overhead"},
                            {"dynamo_use_fullgraph", false},
                            {"dynamo_use_dynamic", true},
                            {"dynamo_use_regional_compilation", false}}));
}

TEST(QuestionnaireTest, InvalidAnswersAreReaskedWithTheReason) {
  // machine type: 'x', 99, 2 (XPU) then 1; machines: 0 then 1; debug: 'maybe' then n;
  // mpirun n; dynamo n; processes: -3 then 3; precision: fp16 (CPU) then fp8 then 2.
  auto run = answer("0\nx\n99\n2\n1\n0\n1\nmaybe\nn\nn\nn\n-3\n3\nfp16\n3\n2\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->num_processes, 3);
  EXPECT_EQ(run.result->mixed_precision, "bf16");
  const std::string& t = run.transcript;
  EXPECT_NE(t.find("Invalid answer: 'x' is not a choice; enter a number from 0 to 10"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: '99' is not a choice"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: multi-XPU is not supported by accel"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: must be at least 1"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: please enter yes or no (or y/n)"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: fp16 needs a GPU"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: fp8 is not supported by accel"), std::string::npos) << t;
}

TEST(QuestionnaireTest, ProcessCountMustSplitEvenlyOverMachines) {
  auto run = answer("0\n1\n2\n0\nhost-a\n\n\nn\nn\nn\n3\n4\n0\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->num_processes, 4);
  EXPECT_EQ(run.result->main_process_port, 29500);
  EXPECT_NE(run.transcript.find("the total must be a multiple of the number of machines (2)"), std::string::npos);
}

TEST(QuestionnaireTest, EndOfInputIsAnErrorNamingTheQuestion) {
  auto run = answer("0\n1\n");
  ASSERT_FALSE(run.result.ok());
  EXPECT_EQ(run.result.error(),
            "end of input before an answer to \"How many different machines will you use (use more than 1 for "
            "multi-node training)?\"; nothing was written");
}

TEST(QuestionnaireTest, MenuAcceptsOptionText) {
  auto run = answer("This machine\nmulti-CPU\n\n\n\n\n2\nBF16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->distributed_type, "MULTI_CPU");
  EXPECT_EQ(run.result->mixed_precision, "bf16");
}

TEST(QuestionnaireTest, OnlyThisMachineIsAccepted) {
  auto run = answer("1\n0\n\n\n\n\n\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->compute_environment, "LOCAL_MACHINE");
  EXPECT_NE(run.transcript.find("Invalid answer: AWS (Amazon SageMaker) is not supported by accel; choose 0"),
            std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, MainProcessAnswersAreChecked) {
  // multi-GPU; 3 machines; rank 5, -1 then 2; ip 'a b', '', 'a/b' then h; port 0, 70000 then
  // 29400; same network no; backend zzz then static; debug n; dynamo n; 6 GPUs; defaults; no.
  auto run = answer("0\n4\n3\n5\n-1\n2\na b\n\na/b\nh\n0\n70000\n29400\nn\nzzz\nstatic\nn\nn\n6\n\n\nno\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(c.machine_rank, 2);
  EXPECT_EQ(c.main_process_ip, "h");
  EXPECT_EQ(c.main_process_port, 29400);
  EXPECT_EQ(c.rdzv_backend, "static");
  EXPECT_FALSE(c.same_network);
  EXPECT_EQ(c.num_processes, 6);
  const std::string& t = run.transcript;
  auto count = [&t](const std::string& what) {
    size_t n = 0;
    for (size_t at = t.find(what); at != std::string::npos; at = t.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("Invalid answer: must be between 0 and 2"), 2u) << t;
  EXPECT_EQ(count("Invalid answer: 'a b' is not a host name or IP address"), 1u) << t;
  EXPECT_EQ(count("Invalid answer: an address or host name is required"), 1u) << t;
  EXPECT_EQ(count("Invalid answer: 'a/b' is not a host name or IP address"), 1u) << t;
  EXPECT_EQ(count("Invalid answer: must be between 1 and 65535"), 2u) << t;
  EXPECT_EQ(count("Invalid answer: 'zzz' is not one of static, c10d, etcd, etcd-v2"), 1u) << t;
}

TEST(QuestionnaireTest, MpirunHostfileIsExpanded) {
  // multi-CPU; 1 machine; debug n; mpirun y with the default ~/hostfile; dynamo n; 2; no.
  auto run = answer("0\n1\n1\nn\ny\n\nn\n2\nno\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->extras.at("mpirun_config"), (nlohmann::json{{"mpirun_hostfile", "/home/u/hostfile"}}));
}

TEST(QuestionnaireTest, CpuOnlySkipsTheGpuQuestions) {
  // No distribution; CPU only y; dynamo n; fp16 refused on CPU, then no.
  auto run = answer("0\n0\ny\nn\nfp16\n0\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_TRUE(run.result->use_cpu);
  EXPECT_EQ(run.result->num_processes, 1);
  EXPECT_FALSE(run.result->gpu_ids.has_value());
  EXPECT_EQ(run.transcript.find("What GPU(s)"), std::string::npos) << run.transcript;
  EXPECT_NE(run.transcript.find("Invalid answer: fp16 needs a GPU"), std::string::npos) << run.transcript;
}

TEST(QuestionnaireTest, MultiGpuOnOneMachineNeedsTwoGpus) {
  // multi-GPU; 1 machine; debug n; dynamo n; 1 GPU refused, then 2; ids all; numa n; fp16.
  auto run = answer("0\n4\n1\nn\nn\n1\n2\nall\nn\n1\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->num_processes, 2);
  EXPECT_EQ(run.result->mixed_precision, "fp16");
  EXPECT_NE(run.transcript.find("Invalid answer: multi-GPU on one machine needs at least 2 GPUs; for one GPU choose "
                                "'No distributed training'"),
            std::string::npos)
      << run.transcript;
}

}  // namespace
}  // namespace accel::config
