#include "config/effective_config.h"

#include <gtest/gtest.h>

#include "config/paths.h"
#include "tests/config/test_util.h"

namespace accel::config {
namespace {

class EffectiveConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = PathEnv{dir_.file("hf"), std::nullopt, "/home/u"};
    ASSERT_TRUE(makeDirectories(dir_.file("hf/accelerate")).ok());
  }
  void writeDefault(const std::string& text) { testing::writeFile(defaultConfigPath(env_), text); }

  testing::ScratchDir dir_;
  PathEnv env_;
};

TEST_F(EffectiveConfigTest, BuiltinDefaultsWithoutFile) {
  auto e = resolveEffectiveConfig({}, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_FALSE(e->file.has_value());
  EXPECT_EQ(e->config.num_processes, 1);
  EXPECT_EQ(e->config.mixed_precision, "no");
  EXPECT_EQ(e->sources.at("num_processes"), Source::Default);
}

TEST_F(EffectiveConfigTest, FlagBeatsFileBeatsDefault) {
  writeDefault(
      "distributed_type: MULTI_CPU\nnum_processes: 4\nmixed_precision: bf16\nuse_cpu: true\n");
  ConfigOverrides flags;
  flags.num_processes = 8;
  auto e = resolveEffectiveConfig(flags, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->file, defaultConfigPath(env_));
  EXPECT_EQ(e->config.num_processes, 8);         // flag
  EXPECT_EQ(e->config.mixed_precision, "bf16");  // file
  EXPECT_EQ(e->config.rdzv_backend, "static");   // default
  EXPECT_EQ(e->sources.at("num_processes"), Source::Flag);
  EXPECT_EQ(e->sources.at("mixed_precision"), Source::File);
  EXPECT_EQ(e->sources.at("rdzv_backend"), Source::Default);
}

TEST_F(EffectiveConfigTest, ExplicitConfigFileBeatsDefaultFile) {
  writeDefault("distributed_type: 'NO'\nmixed_precision: bf16\n");
  testing::writeFile(dir_.file("other.yaml"), "distributed_type: 'NO'\nmixed_precision: fp16\n");
  ConfigOverrides flags;
  flags.config_file = dir_.file("other.yaml");
  auto e = resolveEffectiveConfig(flags, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->config.mixed_precision, "fp16");
}

TEST_F(EffectiveConfigTest, FileWithoutNumProcessesFallsBackToDefault) {
  writeDefault("distributed_type: MULTI_CPU\n");
  auto e = resolveEffectiveConfig({}, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ(e->config.num_processes, 1);
  EXPECT_EQ(e->sources.at("num_processes"), Source::Default);
}

TEST_F(EffectiveConfigTest, CpuAffinityFromTheKeyOrTheFlag) {
  // accelerate 1.14 never copies the key onto its flag (whose default is False, not None); accel
  // honours both, and the flag can only turn it on.
  writeDefault(
      "distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\nenable_cpu_affinity: true\n");
  auto e = resolveEffectiveConfig({}, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_TRUE(e->config.enable_cpu_affinity);
  EXPECT_EQ(e->sources.at("enable_cpu_affinity"), Source::File);
  writeDefault(
      "distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\nenable_cpu_affinity: false\n");
  ConfigOverrides flags;
  flags.enable_cpu_affinity = true;
  e = resolveEffectiveConfig(flags, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_TRUE(e->config.enable_cpu_affinity);
  EXPECT_EQ(e->sources.at("enable_cpu_affinity"), Source::Flag);
  e = resolveEffectiveConfig({}, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_FALSE(e->config.enable_cpu_affinity);
  EXPECT_EQ(e->sources.at("enable_cpu_affinity"), Source::File);
}

TEST_F(EffectiveConfigTest, CpuFlagMakesSeveralProcessesMultiCpu) {
  writeDefault("distributed_type: MULTI_GPU\nnum_processes: 2\n");
  ConfigOverrides flags;
  flags.cpu = true;
  flags.num_processes = 4;
  auto e = resolveEffectiveConfig(flags, env_);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_TRUE(e->config.use_cpu);
  EXPECT_EQ(e->config.distributed_type, "MULTI_CPU");
  EXPECT_EQ(e->sources.at("distributed_type"), Source::Flag);
}

TEST_F(EffectiveConfigTest, FlagErrorsNameTheFlag) {
  auto expectError = [&](ConfigOverrides flags, const std::string& message) {
    auto e = resolveEffectiveConfig(flags, env_);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error(), message);
  };
  ConfigOverrides f;
  f.mixed_precision = "fp32";
  expectError(f, "--mixed_precision: 'fp32' is not one of no, fp16, bf16, fp8");
  f = {};
  f.main_process_port = 70000;
  expectError(f, "--main_process_port: 70000 is out of range 0..65535");
  f = {};
  f.num_processes = 0;
  expectError(f, "--num_processes: 0 is out of range 1..1048576");
  f = {};
  f.gpu_ids = "0,a";
  expectError(f, "--gpu_ids: '0,a': 'a' is not a GPU index (expected 'all' or a list like 0,1,3)");
  f = {};
  f.cpu = true;
  f.multi_gpu = true;
  expectError(f, "--cpu and --multi_gpu cannot be used together");
  f = {};
  f.config_file = dir_.file("missing.yaml");
  expectError(f, "--config_file: '" + dir_.file("missing.yaml") + "' does not exist");
}

TEST_F(EffectiveConfigTest, ConflictBetweenFlagAndFileNamesBoth) {
  writeDefault("distributed_type: MULTI_CPU\nnum_machines: 2\nnum_processes: 4\n");
  ConfigOverrides flags;
  flags.machine_rank = 2;
  auto e = resolveEffectiveConfig(flags, env_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(
      e.error(),
      "machine_rank 2 (from --machine_rank) must be below num_machines 2 (from 'num_machines' in " +
          defaultConfigPath(env_) + ")");
}

TEST_F(EffectiveConfigTest, InvalidDefaultFileIsReported) {
  writeDefault("distributed_type: 'NO'\nnum_proceses: 2\n");
  auto e = resolveEffectiveConfig({}, env_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error(), defaultConfigPath(env_) +
                           ":2:1: unknown key 'num_proceses'; did you mean 'num_processes'?");
}

}  // namespace
}  // namespace accel::config
