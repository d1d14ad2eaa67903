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

}  // namespace
}  // namespace accel::config
