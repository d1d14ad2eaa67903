// accelerate's worker environment, computed as accelerate computes it (values checked against
// accelerate 1.14's launch.py; tests/e2e/accelerate_parity.py checks whole launches against
// environments recorded from accelerate itself).
#include "launcher/plan/accelerate_env.h"

#include <gtest/gtest.h>

#include "launcher/cli/options_from_flags.h"

namespace accel::launcher {
namespace {

using nlohmann::json;
using Env = std::map<std::string, std::string>;

AccelerateArgs argsOf(std::vector<std::string> flags, const std::string& sectionsJson = "{}") {
  flags.push_back("train.py");
  auto parsed = parseLaunchFlags(flags, LaunchMode::Accelerate, {});
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  auto options = launchOptionsFrom(*parsed);
  EXPECT_TRUE(options.ok()) << options.error();
  config::ClusterConfig c;
  const json sections = json::parse(sectionsJson);
  for (const auto& [k, v] : sections.items()) c.extras[k] = v;
  return accelerateArgs(options->accelerate, c);
}

Env envOf(const AccelerateArgs& args, const AccelerateFacts& f, probes::Environment parent = {}) {
  auto e = accelerateEnvironment(args, f, parent);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? *e : Env{};
}

TEST(AccelerateEnvTest, ConfigSectionsFillWhatNoFlagGave) {
  auto args = argsOf(
      {"--fsdp_offload_params", "true"},
      R"({"fsdp_config": {"offload_params": false, "fsdp_sharding_strategy": 2, "version": 2},
                         "fp8_config": {"backend": "TE"}, "dynamo_config": {"backend": "inductor"},
                         "deepspeed_config": {"zero_stage": 3}})");
  EXPECT_EQ(args.at("fsdp_offload_params"), "true");  // the flag wins over the section
  EXPECT_EQ(args.at("fsdp_sharding_strategy"), 2);
  EXPECT_EQ(args.at("fsdp_version"), 2);  // "version" gets accelerate's fsdp_ prefix
  EXPECT_EQ(args.at("fp8_backend"), "TE");
  EXPECT_EQ(args.at("dynamo_backend"), "inductor");
  EXPECT_EQ(args.at("zero_stage"), 3);
}

TEST(AccelerateEnvTest, SimpleLauncherOnCpu) {
  AccelerateFacts f;
  f.use_cpu = true;
  f.num_processes = 4;
  f.physical_cores = 16;
  f.gpu_ids = "0, 1";
  const Env e = envOf(argsOf({}), f);
  EXPECT_EQ(e, (Env{{"ACCELERATE_USE_CPU", "True"},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", "29500"},
                    {"CUDA_VISIBLE_DEVICES", "0,1"},
                    {"ACCELERATE_MIXED_PRECISION", "no"},
                    {"ACCELERATE_DYNAMO_BACKEND", "NO"},
                    {"ACCELERATE_DYNAMO_MODE", "default"},
                    {"ACCELERATE_DYNAMO_USE_FULLGRAPH", "False"},
                    {"ACCELERATE_DYNAMO_USE_DYNAMIC", "False"},
                    {"ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False"},
                    {"OMP_NUM_THREADS", "4"}}));  // 16 physical cores over 4 processes
  EXPECT_EQ(envOf(argsOf({}), f, {"OMP_NUM_THREADS=3"}).at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(envOf(argsOf({}), f, {"OMPI_COMM_WORLD_LOCAL_SIZE=8"}).at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(envOf(argsOf({"--num_cpu_threads_per_process", "7"}), f).at("OMP_NUM_THREADS"), "7");
  f.use_cpu = false;
  f.num_processes = 1;
  const Env gpu = envOf(argsOf({}), f);
  EXPECT_EQ(gpu.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(gpu.count("MASTER_ADDR"), 0u);
}

TEST(AccelerateEnvTest, FsdpAndMegatronOnTheMultiGpuLauncher) {
  AccelerateFacts f;
  f.launcher = AccelerateLauncher::MultiGpu;
  f.num_processes = 2;
  auto args = argsOf(
      {"--use_fsdp", "--fsdp_version", "2", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP"},
      R"({"fsdp_config": {"fsdp_transformer_layer_cls_to_wrap": ["BertLayer", "T5Block"],
                                         "fsdp_use_orig_params": false}})");
  args["use_fsdp"] = true;
  const Env e = envOf(args, f);
  EXPECT_EQ(e.at("ACCELERATE_USE_FSDP"), "true");
  EXPECT_EQ(e.at("FSDP_VERSION"), "2");
  EXPECT_EQ(e.at("FSDP_TRANSFORMER_CLS_TO_WRAP"), "['BertLayer', 'T5Block']");
  EXPECT_EQ(e.at("FSDP_USE_ORIG_PARAMS"), "false");
  EXPECT_EQ(e.at("FSDP_MIN_NUM_PARAMS"), "100000000");
  EXPECT_EQ(e.count("FSDP_STATE_DICT_TYPE"), 0u);
  EXPECT_EQ(e.count("ACCELERATE_USE_CPU"), 0u);
  EXPECT_EQ(e.at("OMP_NUM_THREADS"), "1");
  auto bad = argsOf(
      {},
      R"({"fsdp_config": {"fsdp_cpu_ram_efficient_loading": true, "fsdp_sync_module_states": false}})");
  bad["use_fsdp"] = true;
  EXPECT_FALSE(accelerateEnvironment(bad, f, {}).ok());
  auto megatron =
      argsOf({"--megatron_lm_tp_degree", "2", "--megatron_lm_attention_dropout", "0.1"});
  megatron["use_megatron_lm"] = true;
  const Env m = envOf(megatron, f);
  EXPECT_EQ(m.at("ACCELERATE_USE_MEGATRON_LM"), "true");
  EXPECT_EQ(m.at("MEGATRON_LM_TP_DEGREE"), "2");
  EXPECT_EQ(m.at("MEGATRON_LM_ATTENTION_DROPOUT"), "0.1");
  EXPECT_EQ(m.at("MEGATRON_LM_NO_LOAD_OPTIM"), "False");  // default False is not None: always set
  EXPECT_EQ(m.at("MEGATRON_LM_GRADIENT_CLIPPING"), "1.0");
  EXPECT_EQ(m.count("MEGATRON_LM_NUM_MICRO_BATCHES"), 0u);
}

TEST(AccelerateEnvTest, DeepSpeedLauncher) {
  AccelerateFacts f;
  f.launcher = AccelerateLauncher::DeepSpeed;
  f.num_processes = 2;
  f.cwd = "/work/run";
  f.mixed_precision = "bf16";
  f.mixed_precision_from_config = true;
  f.deepspeed_config_keys = {"gradient_clipping", "zero_stage"};
  auto args = argsOf({"--offload_optimizer_device", "CPU"},
                     R"({"deepspeed_config": {"zero_stage": 2, "gradient_clipping": 1.0,
                                                                "zero3_init_flag": true}})");
  const Env e = envOf(args, f, {"PYTHONPATH=/a::/b"});
  EXPECT_EQ(e, (Env{{"ACCELERATE_MIXED_PRECISION", "bf16"},
                    {"PYTHONPATH", "/a:/b:/work/run"},
                    {"ACCELERATE_CONFIG_DS_FIELDS", "gradient_clipping,zero_stage,mixed_precision"},
                    {"ACCELERATE_USE_DEEPSPEED", "true"},
                    {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"},
                    {"ACCELERATE_GRADIENT_CLIPPING", "1.0"},
                    {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu"},
                    {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"}}));
}

TEST(AccelerateEnvTest, Fp8AndParallelism) {
  AccelerateFacts f;
  f.launcher = AccelerateLauncher::MultiGpu;
  f.mixed_precision = "fp8";
  auto args = argsOf({"--fp8_backend", "te", "--fp8_override_linear_precision", "true,false,true"});
  args["use_parallelism_config"] = true;
  args["parallelism_config_cp_size"] = 2;
  const Env e = envOf(args, f);
  EXPECT_EQ(e.at("ACCELERATE_FP8_BACKEND"), "te");
  EXPECT_EQ(e.at("ACCELERATE_FP8_OVERRIDE_FPROP"), "1");
  EXPECT_EQ(e.at("ACCELERATE_FP8_OVERRIDE_DGRAD"), "0");
  EXPECT_EQ(e.at("ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"), "1");
  EXPECT_EQ(e.at("ACCELERATE_FP8_USE_AUTOCAST_DURING_EVAL"), "False");
  EXPECT_EQ(e.at("ACCELERATE_USE_PARALLELISM_CONFIG"), "true");
  EXPECT_EQ(e.at("PARALLELISM_CONFIG_CP_COMM_STRATEGY"), "allgather");
  EXPECT_EQ(e.count("PARALLELISM_CONFIG_SP_SEQ_LENGTH"), 0u);
  f.mixed_precision = "bf16";
  EXPECT_EQ(envOf(args, f).count("ACCELERATE_FP8_BACKEND"), 0u);  // fp8 settings only with fp8
}

}  // namespace
}  // namespace accel::launcher
