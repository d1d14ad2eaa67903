#include "config/questionnaire.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace accel::config {
namespace {

struct Run {
  Expected<ClusterConfig> result;
  std::string transcript;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The file `accel config` would write, as JSON, for exact comparisons.
nlohmann::json fileOf(const ClusterConfig& c) { return nlohmann::json(c.toFileDocument()); }

Run answer(const std::string& answers) {
  std::istringstream in(answers);
  std::ostringstream out;
  PathEnv env{std::nullopt, std::nullopt, "/home/u"};
  auto result = runQuestionnaire(in, out, env);
  return Run{std::move(result), out.str()};
}

TEST(QuestionnaireTest, AllDefaultsIsOneProcessNoPrecision) {
  // environment, machine type, cpu only, dynamo, deepspeed, gpu ids, numa, precision
  auto run = answer("\n\n\n\n\n\n\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(c.distributed_type, "NO");
  EXPECT_EQ(c.num_processes, 1);
  EXPECT_EQ(c.gpu_ids, "all");
  EXPECT_FALSE(c.use_cpu);
  EXPECT_EQ(c.mixed_precision, "no");
  EXPECT_EQ(c.extras.at("downcast_bf16"), "no");
  EXPECT_EQ(fileOf(c), nlohmann::json::parse(R"({
    "compute_environment": "LOCAL_MACHINE", "debug": false, "distributed_type": "NO", "downcast_bf16": "no",
    "gpu_ids": "all", "machine_rank": 0, "main_training_function": "main", "mixed_precision": "no",
    "num_machines": 1, "num_processes": 1, "rdzv_backend": "static", "same_network": true, "tpu_env": [],
    "tpu_use_cluster": false, "tpu_use_sudo": false, "use_cpu": false})"));
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
  EXPECT_NE(run.transcript.find("Do you want accel to launch mpirun? [yes/NO]"), std::string::npos)
      << run.transcript;
  EXPECT_EQ(run.transcript.find("DeepSpeed"), std::string::npos) << run.transcript;
  EXPECT_EQ(c.extras.count("mpirun_config"), 0u);
}

// accelerate's mpirun question (multi-CPU only): the hostfile lands in mpirun_config, expanded,
// which accel launch then runs mpirun with.
TEST(QuestionnaireTest, MultiCpuAsksForMpirunAndItsHostfile) {
  PathEnv env;
  char tmpl[] = "/tmp/accel-q-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string home = tmpl;
  env.home = home;
  std::ofstream(home + "/hosts") << "localhost slots=4\n";
  // A missing hostfile is refused, naming it, and asked again.
  std::istringstream in("0\n1\n1\nno\nyes\n~/nope\n~/hosts\nno\n4\n0\n");
  std::ostringstream out;
  auto c = runQuestionnaire(in, out, env);
  ASSERT_TRUE(c.ok()) << c.error() << out.str();
  EXPECT_EQ(c->extras.at("mpirun_config"), (nlohmann::json{{"mpirun_hostfile", home + "/hosts"}}));
  EXPECT_NE(out.str().find("Please enter the path to the hostfile to use with mpirun [~/hostfile]"),
            std::string::npos);
  EXPECT_NE(out.str().find("Invalid answer: hostfile '" + home +
                           "/nope' does not exist (one line per host: 'HOST slots=N')"),
            std::string::npos)
      << out.str();
  std::ofstream(home + "/hostfile") << "localhost slots=4\n";
  std::istringstream defaults("0\n1\n1\nno\nyes\n\nno\n4\n0\n");
  c = runQuestionnaire(defaults, out, env);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->extras.at("mpirun_config").at("mpirun_hostfile"), home + "/hostfile");

  // No mpirun question without multi-CPU.
  std::istringstream gpu("0\n0\nn\nn\nn\n\nn\n0\n");
  std::ostringstream gpuOut;
  ASSERT_TRUE(runQuestionnaire(gpu, gpuOut, env).ok()) << gpuOut.str();
  EXPECT_EQ(gpuOut.str().find("mpirun"), std::string::npos);
  std::filesystem::remove_all(home);
}

// The rendezvous backends offered are the ones accel runs; another is refused when answered.
TEST(QuestionnaireTest, RendezvousBackendOffersStaticC10dAndEtcd) {
  auto run = answer("0\n1\n2\n0\nhost-a\n\nn\nzookeeper\netcd\nn\nn\nn\n4\n0\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->rdzv_backend, "etcd");
  EXPECT_NE(run.transcript.find(
                "What rendezvous backend will you use? ('static', 'c10d', 'etcd') [static]"),
            std::string::npos)
      << run.transcript;
  EXPECT_NE(run.transcript.find("'zookeeper' is not one of 'static', 'c10d', 'etcd'"),
            std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, MultiNodeGpuAsksRankAddressPortNetwork) {
  // multi-GPU; 2 machines; rank 1; ip; port; same network no; rdzv c10d; debug y; dynamo y with
  // inductor, customised; DeepSpeed n; FSDP n; Megatron-LM n; 16 GPUs; ids 0,1; numa yes; bf16.
  auto run = answer(
      "0\n4\n2\n1\n10.0.0.1\n29501\nno\nc10d\ny\n"
      "y\n2\ny\n1\nn\ny\nn\n"
      "n\nn\nn\n16\n0,1\nyes\nbf16\n");
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
  EXPECT_EQ(fileOf(c), nlohmann::json::parse(R"({
    "compute_environment": "LOCAL_MACHINE", "debug": true, "distributed_type": "MULTI_GPU", "downcast_bf16": "no",
    "dynamo_config": {"dynamo_backend": "INDUCTOR", "dynamo_mode": "reduce-overhead",
                      "dynamo_use_dynamic": true, "dynamo_use_fullgraph": false,
                      "dynamo_use_regional_compilation": false},
    "enable_cpu_affinity": true, "gpu_ids": "0,1", "machine_rank": 1, "main_process_ip": "10.0.0.1",
    "main_process_port": 29501, "main_training_function": "main", "mixed_precision": "bf16",
    "num_machines": 2, "num_processes": 16, "rdzv_backend": "c10d", "same_network": false, "tpu_env": [],
    "tpu_use_cluster": false, "tpu_use_sudo": false, "use_cpu": false})"));
}

TEST(QuestionnaireTest, InvalidAnswersAreReaskedWithTheReason) {
  // machine type: 'x', 99, 2 (XPU) then 1; machines: 0 then 1; debug: 'maybe' then n;
  // mpirun n; dynamo n; processes: -3 then 3; precision: fp16 (CPU) then fp8 then 2.
  auto run = answer("0\nx\n99\n2\n1\n0\n1\nmaybe\nn\nn\nn\n-3\n3\nfp16\n3\n2\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->num_processes, 3);
  EXPECT_EQ(run.result->mixed_precision, "bf16");
  const std::string& t = run.transcript;
  EXPECT_NE(t.find("Invalid answer: 'x' is not a choice; enter a number from 0 to 10"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("Invalid answer: '99' is not a choice"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: multi-XPU is not supported by accel (accel launches CPU and "
                   "NVIDIA GPU jobs "
                   "only); choose 0 (No distributed training), 1 (multi-CPU) or 4 (multi-GPU)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("Invalid answer: must be at least 1"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: please enter yes or no (or y/n)"), std::string::npos) << t;
  EXPECT_NE(t.find("  [1] fp16 (needs a GPU)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  [3] fp8 (needs a GPU)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("Invalid answer: fp16 needs a GPU and this configuration is CPU-only (accel "
                   "does not fake fp16 in fp32); choose 0 (no) or 2 (bf16)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("Invalid answer: fp8 needs a GPU and this configuration is CPU-only; choose 0 "
                   "(no) or 2 (bf16)\n"),
            std::string::npos)
      << t;
}

TEST(QuestionnaireTest, ProcessCountMustSplitEvenlyOverMachines) {
  auto run = answer("0\n1\n2\n0\nhost-a\n\n\nn\nn\nn\n3\n4\n0\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->num_processes, 4);
  EXPECT_EQ(run.result->main_process_port, 29500);
  EXPECT_NE(run.transcript.find("the total must be a multiple of the number of machines (2)"),
            std::string::npos);
}

TEST(QuestionnaireTest, EndOfInputIsAnErrorNamingTheQuestion) {
  auto run = answer("0\n1\n");
  ASSERT_FALSE(run.result.ok());
  EXPECT_EQ(run.result.error(),
            "end of input before an answer to \"How many different machines will you use (use more "
            "than 1 for "
            "multi-node training)?\"; nothing was written");
}

TEST(QuestionnaireTest, MenuAcceptsOptionText) {
  auto run = answer("This machine\nmulti-CPU\n\n\n\n\n2\nBF16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->distributed_type, "MULTI_CPU");
  EXPECT_EQ(run.result->mixed_precision, "bf16");
}

TEST(QuestionnaireTest, OnlyThisMachineIsAccepted) {
  auto run = answer("1\n0\n\n\n\n\n\n\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->compute_environment, "LOCAL_MACHINE");
  EXPECT_NE(run.transcript.find("  [1] AWS (Amazon SageMaker) (not supported by accel)\n"),
            std::string::npos)
      << run.transcript;
  EXPECT_NE(run.transcript.find(
                "Invalid answer: AWS (Amazon SageMaker) is not supported by accel (accel launches "
                "on this machine only); choose 0 (This machine)\n"),
            std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, MainProcessAnswersAreChecked) {
  // multi-GPU; 3 machines; rank 5, -1 then 2; ip 'a b', '', 'a/b' then h; port 0, 70000 then
  // 29400; same network no; backend zzz then static; debug n; dynamo n; DeepSpeed n; FSDP n;
  // Megatron-LM n; 6 GPUs; defaults; no.
  auto run = answer(
      "0\n4\n3\n5\n-1\n2\na "
      "b\n\na/"
      "b\n10.0.0.300\n10.0.1\nh\n0\n70000\n29400\nn\nzzz\nstatic\nn\nn\nn\nn\nn\n6\n\n\nno\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(c.machine_rank, 2);
  EXPECT_EQ(c.main_process_ip, "h");
  EXPECT_EQ(c.main_process_port, 29400);
  EXPECT_EQ(c.rdzv_backend, "static");
  EXPECT_FALSE(c.same_network);
  EXPECT_EQ(c.num_processes, 6);
  const std::string& t = run.transcript;
  EXPECT_EQ(count(t, "Invalid answer: must be between 0 and 2"), 2u) << t;
  EXPECT_EQ(count(t, "Invalid answer: 'a b' is not a host name or IP address"), 1u) << t;
  EXPECT_EQ(count(t, "Invalid answer: an address or host name is required"), 1u) << t;
  EXPECT_EQ(count(t, "Invalid answer: 'a/b' is not a host name or IP address"), 1u) << t;
  EXPECT_EQ(
      count(t, "Invalid answer: '10.0.0.300' is not an IP address (four numbers of 0 to 255)"), 1u)
      << t;
  EXPECT_EQ(count(t, "Invalid answer: '10.0.1' is not an IP address (four numbers of 0 to 255)"),
            1u)
      << t;
  EXPECT_EQ(count(t, "Invalid answer: must be between 1 and 65535"), 2u) << t;
  EXPECT_EQ(count(t, "Invalid answer: 'zzz' is not one of 'static', 'c10d'"), 1u) << t;
}

TEST(QuestionnaireTest, CpuOnlySkipsTheGpuQuestions) {
  // No distribution; CPU only y; dynamo n; fp16 refused on CPU, then no.
  auto run = answer("0\n0\ny\nn\nfp16\n0\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_TRUE(run.result->use_cpu);
  EXPECT_EQ(run.result->num_processes, 1);
  EXPECT_FALSE(run.result->gpu_ids.has_value());
  EXPECT_EQ(run.transcript.find("What GPU(s)"), std::string::npos) << run.transcript;
  EXPECT_NE(run.transcript.find("  [1] fp16 (needs a GPU)\n"), std::string::npos) << run.transcript;
  EXPECT_NE(
      run.transcript.find("Invalid answer: fp16 needs a GPU and this configuration is CPU-only"),
      std::string::npos)
      << run.transcript;
  EXPECT_EQ(run.transcript.find("DeepSpeed"), std::string::npos) << run.transcript;  // not on CPU
}

TEST(QuestionnaireTest, MultiGpuOnOneMachineNeedsTwoGpus) {
  // multi-GPU; 1 machine; debug n; dynamo n; DeepSpeed n; FSDP n; Megatron-LM n; 1 GPU refused,
  // then 2; ids all; numa n; fp16.
  auto run = answer("0\n4\n1\nn\nn\nn\nn\nn\n1\n2\nall\nn\n1\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->num_processes, 2);
  EXPECT_EQ(run.result->mixed_precision, "fp16");
  EXPECT_NE(
      run.transcript.find(
          "Invalid answer: multi-GPU on one machine needs at least 2 GPUs; for one GPU choose "
          "'No distributed training'"),
      std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, UnsupportedMenuEntryIsMarkedAndRefusedAtOnce) {
  // multi-XPU chosen, then input ends: the next prompt must be the machine menu again, not a
  // further question, and the menu itself said so before the answer.
  auto run = answer("0\n2\n");
  ASSERT_FALSE(run.result.ok());
  EXPECT_EQ(run.result.error(),
            "end of input before an answer to \"Which type of machine are you using?\"; nothing "
            "was written");
  const std::string& t = run.transcript;
  const size_t marked = t.find("  [2] multi-XPU (not supported by accel)\n");
  const size_t refused = t.find("Invalid answer: multi-XPU is not supported by accel");
  ASSERT_NE(marked, std::string::npos) << t;
  ASSERT_NE(refused, std::string::npos) << t;
  EXPECT_LT(marked, refused);
  EXPECT_EQ(count(t, "Which type of machine are you using?"), 2u) << t;
  EXPECT_EQ(t.find("How many different machines"), std::string::npos) << t;
  for (const char* entry : {"[3] multi-HPU", "[5] multi-NPU", "[6] multi-MLU", "[7] multi-SDAA",
                            "[8] multi-MUSA", "[9] multi-NEURON", "[10] TPU"}) {
    EXPECT_NE(t.find(std::string(entry) + " (not supported by accel)\n"), std::string::npos)
        << entry << t;
  }
  for (const char* entry :
       {"[0] No distributed training\n", "[1] multi-CPU\n", "[4] multi-GPU\n"}) {
    EXPECT_NE(t.find(entry), std::string::npos) << entry << t;
  }
}

TEST(QuestionnaireTest, DeepSpeedZero3WithNvmeOffloadOnTwoMachines) {
  // multi-GPU; 2 machines; rank 0; ip; default port; same network; debug n; dynamo n;
  // DeepSpeed y; no JSON file; stage 3; optimizer → nvme, params → cpu; nvme path; 4 steps;
  // clipping 0.5; save 16-bit y; zero.Init y; MoE y with a class; launcher pdsh refused, then
  // the default (standard); 16 GPUs; bf16.
  auto run = answer(
      "0\n4\n2\n0\n10.0.0.1\n\n\nn\nn\n"
      "y\nn\n3\n2\n1\n/mnt/nvme\n4\ny\n0.5\ny\ny\ny\nMixtralSparseMoeBlock\n0\n\n"
      "16\nbf16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  const auto& c = *run.result;
  EXPECT_EQ(fileOf(c), nlohmann::json::parse(R"({
    "compute_environment": "LOCAL_MACHINE", "debug": false, "distributed_type": "DEEPSPEED",
    "deepspeed_config": {"deepspeed_moe_layer_cls_names": "MixtralSparseMoeBlock",
                         "deepspeed_multinode_launcher": "standard", "gradient_accumulation_steps": 4,
                         "gradient_clipping": 0.5, "offload_optimizer_device": "nvme",
                         "offload_optimizer_nvme_path": "/mnt/nvme", "offload_param_device": "cpu",
                         "zero3_init_flag": true, "zero3_save_16bit_model": true, "zero_stage": 3},
    "downcast_bf16": "no", "machine_rank": 0, "main_process_ip": "10.0.0.1", "main_process_port": 29500,
    "main_training_function": "main", "mixed_precision": "bf16", "num_machines": 2, "num_processes": 16,
    "rdzv_backend": "static", "same_network": true, "tpu_env": [], "tpu_use_cluster": false,
    "tpu_use_sudo": false, "use_cpu": false})"))
      << run.transcript;
  const std::string& t = run.transcript;
  EXPECT_NE(t.find("  [0] pdsh (not supported by accel)\n  [1] standard\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("Invalid answer: pdsh is not supported by accel (DeepSpeed's own multi-node "
                   "launchers; accel "
                   "starts one agent per node); choose 1 (standard)\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("FullyShardedDataParallel"), std::string::npos) << t;  // DeepSpeed excludes FSDP
  EXPECT_EQ(t.find("What GPU(s) (by id)"), std::string::npos)
      << t;  // as accelerate: not for DeepSpeed
}

TEST(QuestionnaireTest, DeepSpeedJsonFileLeavesPrecisionToTheFile) {
  // No distribution; GPU; dynamo n; DeepSpeed y; JSON file y at ~/ds.json; zero.Init n; MoE n;
  // 1 GPU. No precision question: the JSON file decides, and the key is left out.
  auto run = answer("0\n0\nn\nn\ny\ny\n~/ds.json\nn\nn\n1\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  auto file = fileOf(*run.result);
  EXPECT_EQ(file.at("distributed_type"), "DEEPSPEED");
  EXPECT_EQ(file.at("num_processes"), 1);
  EXPECT_EQ(
      file.at("deepspeed_config"),
      (nlohmann::json{{"deepspeed_config_file", "/home/u/ds.json"}, {"zero3_init_flag", false}}));
  EXPECT_EQ(file.count("mixed_precision"), 0u);
  EXPECT_EQ(file.count("gpu_ids"), 0u);
  EXPECT_EQ(run.transcript.find("mixed precision"), std::string::npos) << run.transcript;
  EXPECT_EQ(run.transcript.find("ZeRO optimization stage"), std::string::npos) << run.transcript;
}

TEST(QuestionnaireTest, FsdpVersion1AsksEveryFsdp1Question) {
  // multi-GPU; 1 machine; debug n; dynamo n; DeepSpeed n; FSDP y; version 1 (menu 0);
  // SHARD_GRAD_OP; offload y; transformer wrap without _no_split_modules, two classes;
  // BACKWARD_POST; SHARDED_STATE_DICT; forward prefetch y; use_orig_params n; RAM-efficient
  // loading n, so sync_module_states is asked: n; checkpointing y; 8 GPUs; fp16.
  auto run = answer(
      "0\n4\n1\nn\nn\nn\ny\n0\n1\ny\n0\nn\nBertLayer,"
      "BertEmbeddings\n1\n2\ny\nn\nn\nn\ny\n8\nfp16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  auto file = fileOf(*run.result);
  EXPECT_EQ(file.at("distributed_type"), "FSDP");
  EXPECT_EQ(file.at("num_processes"), 8);
  EXPECT_EQ(file.at("mixed_precision"), "fp16");
  EXPECT_EQ(file.at("fsdp_config"), nlohmann::json::parse(R"({
    "fsdp_activation_checkpointing": true, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    "fsdp_backward_prefetch": "BACKWARD_POST", "fsdp_cpu_ram_efficient_loading": false,
    "fsdp_forward_prefetch": true, "fsdp_offload_params": true, "fsdp_reshard_after_forward": "SHARD_GRAD_OP",
    "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_sync_module_states": false,
    "fsdp_transformer_layer_cls_to_wrap": "BertLayer,BertEmbeddings", "fsdp_use_orig_params": false,
    "fsdp_version": 1})"))
      << run.transcript;
  EXPECT_EQ(file.count("gpu_ids"), 0u);
  EXPECT_EQ(run.transcript.find("numa"), std::string::npos) << run.transcript;
  EXPECT_NE(
      run.transcript.find(
          "What should be your FSDP version?\n  [0] FSDP1\n  [1] FSDP2\nEnter a number [1]: "),
      std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, FsdpVersion2DefaultsWithSizeBasedWrap) {
  // ... FSDP y; version default (2); reshard default (yes); offload default; SIZE_BASED_WRAP;
  // min params default; state dict default; RAM-efficient default; checkpointing default;
  // parallelism config default (no); 2 GPUs; precision default.
  auto run = answer("0\n4\n1\nn\nn\nn\ny\n\n\n\n1\n\n\n\n\n\n2\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  auto file = fileOf(*run.result);
  EXPECT_EQ(file.at("fsdp_config"), nlohmann::json::parse(R"({
    "fsdp_activation_checkpointing": false, "fsdp_auto_wrap_policy": "SIZE_BASED_WRAP",
    "fsdp_cpu_ram_efficient_loading": true, "fsdp_min_num_params": 100000000, "fsdp_offload_params": false,
    "fsdp_reshard_after_forward": true, "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_version": 2})"))
      << run.transcript;
  EXPECT_EQ(file.at("num_processes"), 2);
  EXPECT_EQ(file.at("mixed_precision"), "no");
  EXPECT_EQ(file.count("parallelism_config"),
            0u);  // declined: the key accelerate 0.27 rejects is not written
  // FSDP1-only questions are not asked for FSDP2.
  EXPECT_EQ(run.transcript.find("backward prefetch"), std::string::npos) << run.transcript;
  EXPECT_EQ(run.transcript.find("use_orig_params"), std::string::npos) << run.transcript;
  EXPECT_NE(run.transcript.find("  [0] SHARDED_STATE_DICT\n  [1] FULL_STATE_DICT\n"),
            std::string::npos);
}

TEST(QuestionnaireTest, DynamoXlaBackendsAreMarkedAndRefused) {
  // No distribution; GPU; dynamo y; backend 10 (XLA) refused, then tvm by name; no customising;
  // DeepSpeed n; ids all; numa n; no.
  auto run = answer("0\n0\nn\ny\n10\ntvm\nn\nn\n\n\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(run.result->extras.at("dynamo_config"), (nlohmann::json{{"dynamo_backend", "TVM"}}));
  EXPECT_NE(run.transcript.find("  [10] aot_torchxla_trace_once (not supported by accel)\n"),
            std::string::npos);
  EXPECT_NE(
      run.transcript.find(
          "Invalid answer: aot_torchxla_trace_once is not supported by accel (an XLA backend, "
          "for TPUs)"),
      std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, Fsdp2ParallelismConfigWithContextParallelism) {
  // ... FSDP y; FSDP2 with defaults but NO_WRAP; parallelism config y: replicate 2, shard 4,
  // tp 1, cp 2 (0 refused first), alltoall; 16 GPUs; bf16.
  auto run = answer("0\n4\n1\nn\nn\nn\ny\n\n\n\n2\n\n\n\ny\n2\n4\n\n0\n2\n1\n16\nbf16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  auto file = fileOf(*run.result);
  EXPECT_EQ(file.at("distributed_type"), "FSDP");
  EXPECT_EQ(file.at("parallelism_config"), nlohmann::json::parse(R"({
    "parallelism_config_cp_comm_strategy": "alltoall", "parallelism_config_cp_size": 2,
    "parallelism_config_dp_replicate_size": 2, "parallelism_config_dp_shard_size": 4,
    "parallelism_config_tp_size": 1})"))
      << run.transcript;
  EXPECT_EQ(file.at("num_processes"), 16);
  EXPECT_EQ(count(run.transcript, "Invalid answer: must be at least 1"), 1u) << run.transcript;
  EXPECT_EQ(run.transcript.find("Megatron"), std::string::npos)
      << run.transcript;  // FSDP excludes it
}

TEST(QuestionnaireTest, MegatronLmWritesItsPrefixedKeys) {
  // multi-GPU; 1 machine; debug n; dynamo n; DeepSpeed n; FSDP n; Megatron-LM y: tp 2, sequence
  // parallelism n, pp 4, 8 micro-batches, recompute default, distributed optimizer n, clipping
  // -1 refused then 0; 8 GPUs; bf16.
  auto run = answer("0\n4\n1\nn\nn\nn\nn\ny\n2\nn\n4\n8\n\nn\n-1\n0\n8\nbf16\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  auto file = fileOf(*run.result);
  EXPECT_EQ(file.at("distributed_type"), "MEGATRON_LM");
  EXPECT_EQ(file.at("megatron_lm_config"), nlohmann::json::parse(R"({
    "megatron_lm_gradient_clipping": 0.0, "megatron_lm_num_micro_batches": 8, "megatron_lm_pp_degree": 4,
    "megatron_lm_recompute_activations": true, "megatron_lm_sequence_parallelism": false,
    "megatron_lm_tp_degree": 2, "megatron_lm_use_distributed_optimizer": false})"))
      << run.transcript;
  EXPECT_EQ(file.at("num_processes"), 8);
  EXPECT_EQ(file.count("gpu_ids"), 0u);  // as accelerate: not asked for Megatron-LM
  EXPECT_NE(run.transcript.find("Invalid answer: must be 0 (off) or more"), std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, MegatronLmDegreesOfOneSkipTheirFollowUps) {
  auto run = answer("0\n4\n1\nn\nn\nn\nn\ny\n\n\n\n\n\n2\n\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  EXPECT_EQ(fileOf(*run.result).at("megatron_lm_config"), nlohmann::json::parse(R"({
    "megatron_lm_gradient_clipping": 1.0, "megatron_lm_pp_degree": 1, "megatron_lm_recompute_activations": true,
    "megatron_lm_tp_degree": 1, "megatron_lm_use_distributed_optimizer": true})"))
      << run.transcript;
  EXPECT_EQ(run.transcript.find("Sequence Parallelism"), std::string::npos) << run.transcript;
  EXPECT_EQ(run.transcript.find("micro-batches"), std::string::npos) << run.transcript;
}

TEST(QuestionnaireTest, Fp8TransformerEngineWritesItsRecipe) {
  // No distribution; GPU; dynamo n; DeepSpeed n; ids all; numa n; fp8; te; eval autocast y;
  // margin -1 refused then 2; interval default; E4M3; history 16; most_recent; overrides y:
  // fprop y, dgrad n, wgrad y.
  auto run = answer("0\n0\nn\nn\nn\n\nn\nfp8\nte\ny\n-1\n2\n\n1\n16\n1\ny\ny\nn\ny\n");
  ASSERT_TRUE(run.result.ok()) << run.result.error() << run.transcript;
  auto file = fileOf(*run.result);
  EXPECT_EQ(file.at("mixed_precision"), "fp8");
  EXPECT_EQ(file.at("fp8_config"), nlohmann::json::parse(R"({
    "amax_compute_algorithm": "most_recent", "amax_history_length": 16, "backend": "TE", "fp8_format": "E4M3",
    "interval": 1, "margin": 2, "override_linear_precision": [true, false, true],
    "use_autocast_during_eval": true})"))
      << run.transcript;
  EXPECT_NE(run.transcript.find("Invalid answer: must be at least 0"), std::string::npos)
      << run.transcript;
}

TEST(QuestionnaireTest, Fp8MsampAndAoAskOnlyTheirOwnOptions) {
  auto msamp = answer("0\n0\nn\nn\nn\n\nn\n3\n2\n\n");
  ASSERT_TRUE(msamp.result.ok()) << msamp.result.error() << msamp.transcript;
  EXPECT_EQ(fileOf(*msamp.result).at("fp8_config"),
            (nlohmann::json{{"backend", "MSAMP"}, {"optimization_level", "O2"}}));
  EXPECT_EQ(msamp.transcript.find("margin"), std::string::npos) << msamp.transcript;

  auto ao = answer("0\n0\nn\nn\nn\n\nn\n3\n\n\nn\n");
  ASSERT_TRUE(ao.result.ok()) << ao.result.error() << ao.transcript;
  EXPECT_EQ(
      fileOf(*ao.result).at("fp8_config"),
      (nlohmann::json{
          {"backend", "AO"}, {"enable_fsdp_float8_all_gather", true}, {"pad_inner_dim", false}}));

  auto bf16 =
      answer("0\n0\nn\nn\nn\n\nn\n2\n");  // no fp8: no fp8_config, which accelerate 0.27 rejects
  ASSERT_TRUE(bf16.result.ok()) << bf16.result.error() << bf16.transcript;
  EXPECT_EQ(fileOf(*bf16.result).count("fp8_config"), 0u);
}

}  // namespace
}  // namespace accel::config
