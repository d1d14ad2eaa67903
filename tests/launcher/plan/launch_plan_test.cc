#include "launcher/plan/launch_plan.h"

#include <gtest/gtest.h>

#include "launcher/cli/options_from_flags.h"
#include "launcher/plan/worker_env.h"
#include "probes/run_program.h"
#include "tests/config/test_util.h"

namespace accel::launcher {
namespace {

class LaunchPlanTest : public ::testing::Test {
 protected:
  Expected<LaunchPlan> plan(LaunchOptions o, int gpus = 0,
                            probes::Environment env = {"PATH=/usr/bin:/bin"}) {
    return makeLaunchPlan(o, paths_, env, [gpus] { return gpus; });
  }
  // accel launch with no flag but the command (every flag at accelerate's default).
  LaunchOptions options(std::vector<std::string> command = {"/bin/true"}) {
    LaunchOptions o;
    const ParsedLaunchFlags defaults = defaultLaunchFlags(LaunchMode::Accelerate);
    o.accelerate.values = defaults.values;
    o.command = std::move(command);
    return o;
  }
  testing::ScratchDir dir_;
  config::PathEnv paths_{dir_.path(), std::nullopt, "/root"};
};

TEST_F(LaunchPlanTest, DefaultsToOneProcess) {
  auto p = plan(options());
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->world_size, 1);
  EXPECT_EQ(p->argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(p->omp_num_threads,
            1);                   // accelerate's OMP_NUM_THREADS for a process that is not CPU-only
  EXPECT_FALSE(p->torchrun_env);  // accelerate's simple launcher: one process, no RANK/LOCAL_RANK
  EXPECT_FALSE(p->master_port.has_value());
}

// accelerate's warning without a config file, word for word, naming only what no flag gave.
TEST_F(LaunchPlanTest, DefaultsNoticeNamesWhatNoFlagOrFileGave) {
  auto p = plan(options());
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->defaults_notice,
            "The following values were not passed to `accel launch` and had defaults used "
            "instead:\n"
            "\t`--num_processes` was set to a value of `1`\n"
            "\t`--num_machines` was set to a value of `1`\n"
            "\t`--mixed_precision` was set to a value of `'no'`\n"
            "\t`--dynamo_backend` was set to a value of `'no'`\n"
            "To avoid this warning pass in values for each of the problematic parameters or run "
            "`accel config`.");
  auto o = options();
  o.config.num_processes = 2;
  o.config.mixed_precision = "no";
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->defaults_notice,
            "The following values were not passed to `accel launch` and had defaults used "
            "instead:\n"
            "\t`--num_machines` was set to a value of `1`\n"
            "\t`--dynamo_backend` was set to a value of `'no'`\n"
            "To avoid this warning pass in values for each of the problematic parameters or run "
            "`accel config`.");
  o.config.num_machines = 1;
  o.accelerate.given.insert("dynamo_backend");
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->defaults_notice, "");  // every value given
  // A config file gives them: no notice, whatever it holds.
  testing::writeFile(dir_.file("c.yaml"), "distributed_type: NO\n");
  o = options();
  o.config.config_file = dir_.file("c.yaml");
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->defaults_notice, "");
  o = options();
  o.mode = LaunchMode::Torchrun;  // torchrun has no such warning
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->defaults_notice, "");
}

TEST_F(LaunchPlanTest, PythonScriptRunsUnbuffered) {
  testing::writeFile(dir_.file("train.py"), "print(1)\n");
  auto o = options({dir_.file("train.py"), "--lr", "0.1"});
  o.python = "/bin/sh";  // any executable stands in for the interpreter
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->argv,
            (std::vector<std::string>{"/bin/sh", "-u", dir_.file("train.py"), "--lr", "0.1"}));
}

// The interpreter: --python, else the config's accel_python, else $PYTHON_EXEC, else python3
// (python_by_default: planLaunch may take one with torch); one that is not there is named with
// where it came from.
TEST_F(LaunchPlanTest, TheInterpreterIsTheFlagsElseTheConfigsElsePythonExecElsePython3) {
  testing::writeFile(dir_.file("train.py"), "print(1)\n");
  testing::writeFile(dir_.file("c.yaml"), "distributed_type: NO\naccel_python: /bin/sh\n");
  testing::writeFile(dir_.file("bad.yaml"), "distributed_type: NO\naccel_python: /no/python\n");
  auto interpreter = [&](std::optional<std::string> flag, std::optional<std::string> file,
                         probes::Environment env) -> std::string {
    auto o = options({dir_.file("train.py")});
    o.python = flag;
    if (file) o.config.config_file = dir_.file(*file);
    auto p = plan(o, 0, env);
    if (!p.ok()) return "error: " + p.error();
    return p->argv.at(0) + (p->python_by_default ? " (by default)" : "");
  };
  const probes::Environment exec{"PATH=/usr/bin:/bin", "PYTHON_EXEC=/bin/cat"};
  EXPECT_EQ(interpreter("/bin/true", "c.yaml", exec), "/bin/true");
  EXPECT_EQ(interpreter(std::nullopt, "c.yaml", exec), "/bin/sh");
  EXPECT_EQ(interpreter(std::nullopt, std::nullopt, exec), "/bin/cat");
  EXPECT_EQ(interpreter(std::nullopt, "bad.yaml", exec),
            "error: python interpreter '/no/python' not found (from the config's accel_python)");
  const std::string python3 = probes::findInPath("python3");
  EXPECT_EQ(interpreter(std::nullopt, std::nullopt, {"PATH=/usr/bin:/bin"}),
            python3.empty() ? "error: python interpreter 'python3' not found in PATH (set "
                              "--python, accel_python in the config, or PYTHON_EXEC)"
                            : python3 + " (by default)");
}

TEST_F(LaunchPlanTest, OmpThreadsNoticeOnlyWhenUnsetAndSeveralProcesses) {
  auto o = options();
  o.config.num_processes = 4;
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->omp_num_threads, 1);
  EXPECT_TRUE(p->omp_notice);
  auto q = plan(o, 0, {"PATH=/usr/bin", "OMP_NUM_THREADS=8"});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->omp_num_threads, 8);  // the user's value, passed on as accelerate does
  EXPECT_FALSE(q->omp_notice);
}

TEST_F(LaunchPlanTest, GpuChecks) {
  auto o = options();
  o.config.multi_gpu = true;
  o.config.num_processes = 4;
  auto none = plan(o, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error(),
            "multi-GPU training was requested (--multi_gpu) but no GPU is usable on this machine; "
            "use --cpu instead of --multi_gpu");
  auto two = plan(o, 2);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(
      two.error(),
      "num_processes 4 on this machine is more than the 2 GPU(s) available; lower --num_processes "
      "or use --cpu");
  o.config.gpu_ids = "1,3";
  auto ids = plan(o, 8);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(
      ids.error(),
      "num_processes 4 on this machine is more than the 2 GPU(s) available in gpu_ids 1,3; lower "
      "--num_processes or use --cpu");
  o.config.num_processes = 2;
  auto ok = plan(o, 8);
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->common_env.at("CUDA_VISIBLE_DEVICES"), "1,3");
  // accelerate's multi-GPU environment has neither ACCELERATE_USE_CPU nor KMP_* (its simple
  // launcher's).
  EXPECT_EQ(ok->common_env.count("ACCELERATE_USE_CPU"), 0u);
  EXPECT_EQ(ok->common_env.count("KMP_AFFINITY"), 0u);
}

TEST_F(LaunchPlanTest, CpuJobsNeverAskForGpus) {
  auto o = options();
  o.config.cpu = true;
  o.config.num_processes = 2;
  auto p = makeLaunchPlan(o, paths_, {"PATH=/usr/bin"}, []() -> int {
    ADD_FAILURE() << "GPU count asked for a CPU job";
    return 0;
  });
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->config.config.distributed_type, "MULTI_CPU");
}

TEST_F(LaunchPlanTest, Errors) {
  auto expect = [&](LaunchOptions o, const std::string& message) {
    auto p = plan(o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error(), message);
  };
  expect(options({}), "no training script given: accel launch [flags] SCRIPT [args...]");
  expect(options({dir_.file("nope.py")}),
         "training script '" + dir_.file("nope.py") + "' not found");
  testing::writeFile(dir_.file("data.txt"), "");
  expect(options({dir_.file("data.txt")}),
         "training script '" + dir_.file("data.txt") +
             "' is not executable (chmod +x it, or give a .py file)");
  auto o = options();
  o.config.mixed_precision = "fp16";
  expect(o, "mixed_precision fp16 needs a GPU and none is usable here; use bf16 or no");
  o = options();
  o.config.num_machines = 2;
  o.config.num_processes = 4;
  expect(o,
         "--main_process_ip: required with --num_machines 2 (the address of machine_rank 0, which "
         "hosts the job's "
         "store)");
  o.config.main_process_ip = "10.0.0.1";
  expect(
      o,
      "--main_process_port: required with --num_machines 2 (every machine must use the same port)");
  o.config.main_process_port = 29500;
  o.rdzv_conf = "timeout=abc";
  expect(o, "--rdzv_conf: 'timeout=abc' is not timeout=SECONDS (more than 0)");
  o = options();
  o.module = true;
  o.no_python = true;
  expect(o, "-m/--module and --no_python cannot be used together");
  o = options();
  o.tee = "4";
  expect(o,
         "--tee: '4' is not a stream mask (0 none, 1 stdout, 2 stderr, 3 both; or "
         "LOCAL_RANK:MASK,... as in 0:3,1:1)");
  o = options();
  o.redirects = "0:3,1:1";  // one process: local rank 1 does not exist
  expect(o, "--redirects: '0:3,1:1': local rank 1 does not exist (0..0)");
  o = options();
  o.rdzv_id = "a/b";
  expect(o, "--rdzv_id: 'a/b' must be a non-empty name without '/'");
}

// torchrun's meaning: redirected streams go to files only, teed ones to files and the console,
// the rest to the console only; --log_dir keeps every stream in files (accel's promise);
// --console_streams and --local_ranks_filter narrow the console further.
TEST_F(LaunchPlanTest, RedirectsAndTeeDecideFilesAndConsole) {
  auto o = options();
  o.config.num_processes = 4;
  o.config.cpu = true;
  o.redirects = "0:3,1:1,2:2";
  o.tee = "1:2,2:2,3:1";
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->redirects, (std::vector<int>{3, 1, 2, 0}));
  EXPECT_EQ(p->tee, (std::vector<int>{0, 2, 2, 1}));
  EXPECT_EQ((std::vector<int>{p->fileStreams(0), p->fileStreams(1), p->fileStreams(2),
                              p->fileStreams(3)}),
            (std::vector<int>{3, 3, 2, 1}));
  EXPECT_EQ((std::vector<int>{p->consoleStreams(0), p->consoleStreams(1), p->consoleStreams(2),
                              p->consoleStreams(3)}),
            (std::vector<int>{0, 2, 3, 3}));
  EXPECT_TRUE(p->keepsFiles());

  o.console_streams = 2;
  o.local_ranks_filter = "1,2";
  o.log_dir = dir_.file("logs");
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ((std::vector<int>{p->fileStreams(0), p->fileStreams(1), p->fileStreams(2),
                              p->fileStreams(3)}),
            (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ((std::vector<int>{p->consoleStreams(0), p->consoleStreams(1), p->consoleStreams(2),
                              p->consoleStreams(3)}),
            (std::vector<int>{0, 2, 2, 0}));

  p = plan(options());  // the defaults: everything on the console, no files
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->consoleStreams(0), 3);
  EXPECT_EQ(p->fileStreams(0), 0);
  EXPECT_FALSE(p->keepsFiles());
}

TEST_F(LaunchPlanTest, RdzvIdIsTheRunId) {
  auto o = options();
  o.rdzv_id = "job42";
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->run_id, "job42");
}

TEST_F(LaunchPlanTest, DevicesAccelCannotRunAreRefused) {
  auto o = options();
  o.config.mixed_precision =
      "fp8";  // the workers' libraries (TE, torchao, MS-AMP) do fp8; the launcher passes it on
  auto p = plan(o, 8);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->common_env.at("ACCELERATE_MIXED_PRECISION"), "fp8");
  EXPECT_EQ(p->common_env.at("ACCELERATE_FP8_FORMAT"), "HYBRID");
  testing::writeFile(dir_.file("xpu.yaml"), "distributed_type: MULTI_XPU\nnum_processes: 2\n");
  o = options();
  o.config.config_file = dir_.file("xpu.yaml");
  p = plan(o, 8);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), "distributed_type MULTI_XPU (in " + dir_.file("xpu.yaml") +
                           ") is not supported by accel, which launches CPU and CUDA GPU jobs (NO, "
                           "MULTI_CPU, MULTI_GPU, "
                           "FSDP, DEEPSPEED, MEGATRON_LM)");
  testing::writeFile(dir_.file("tpu.yaml"), "distributed_type: XLA\n");
  o.config.config_file = dir_.file("tpu.yaml");
  p = plan(o, 8);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "distributed_type XLA (in " + dir_.file("tpu.yaml") +
                "): TPU jobs are launched by torch_xla; accel launches CPU and CUDA GPU jobs");
}

TEST_F(LaunchPlanTest, StoreLimitsTakeSizesAndNeedRoomForOneValue) {
  auto p = plan(options());
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->store_connection_input_bytes, 128ull << 20);
  EXPECT_EQ(p->store_input_budget_bytes, 1ull << 30);
  auto o = options();
  o.store_connection_input_limit = "100MiB";
  o.store_input_budget = "2g";
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->store_connection_input_bytes, 100ull << 20);
  EXPECT_EQ(p->store_input_budget_bytes, 2ull << 30);
  o.store_input_budget = "104857600";  // bytes: exactly one connection's limit
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->store_input_budget_bytes, 100ull << 20);

  auto expect = [&](LaunchOptions bad, const std::string& message) {
    auto q = plan(bad);
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.error(), message);
  };
  o = options();
  o.store_connection_input_limit = "12 parsecs";
  expect(o,
         "--store_connection_input_limit: '12 parsecs' is not a size (bytes, or a number with K, M "
         "or G)");
  o.store_connection_input_limit = "M";
  expect(o,
         "--store_connection_input_limit: 'M' is not a size (bytes, or a number with K, M or G)");
  o.store_connection_input_limit = "99999999999999G";
  expect(o,
         "--store_connection_input_limit: '99999999999999G' is not a size (bytes, or a number with "
         "K, M or G)");
  o.store_connection_input_limit = "64M";
  expect(o,
         "--store_connection_input_limit: must be at least 67109888 bytes (64 MiB, the longest "
         "value the store "
         "takes, plus 1 KiB)");
  o = options();
  o.store_input_budget = "127M";
  expect(o,
         "--store_input_budget: 133169152 bytes is less than one connection may hold "
         "(--store_connection_input_limit 134217728)");
}

TEST_F(LaunchPlanTest, AgentFlagsAreChecked) {
  auto expect = [&](LaunchOptions o, const std::string& message) {
    auto p = plan(o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error(), message);
  };
  // The ranges of the agent's numeric flags are checked once, where the command line is read
  // (LaunchOptionsTest.AgentFlagRangesAreCheckedWhereTheyAreRead).
  auto o = options();
  o.config.num_processes = 2;
  o.local_ranks_filter = "0,2";
  expect(o, "--local_ranks_filter: '2' is not a local rank (0..1)");

  o = options();
  o.config.num_processes = 3;
  o.local_ranks_filter = "0,2";
  o.console_streams = 1;
  o.tee = "1";
  o.max_restarts = 2;
  o.num_cpu_threads_per_process = 5;
  o.role = "trainer";
  o.term_timeout = std::chrono::milliseconds(700);
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->console_ranks, (std::set<int>{0, 2}));
  EXPECT_EQ(p->console_streams, 1);
  EXPECT_EQ(p->tee, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(p->max_restarts, 2);
  EXPECT_EQ(p->omp_num_threads, 5);  // the flag wins, without a notice
  EXPECT_FALSE(p->omp_notice);
  EXPECT_EQ(p->role, "trainer");
  EXPECT_EQ(p->term_timeout, std::chrono::milliseconds(700));
  EXPECT_EQ(p->run_id.rfind("accel-", 0), 0u) << p->run_id;
}

TEST_F(LaunchPlanTest, MachinesAgreeOnTheRunIdAndMayRestart) {
  auto o = options();
  o.config.num_machines = 2;
  o.config.num_processes = 4;
  o.config.machine_rank = 1;
  o.config.main_process_ip = "10.0.0.1";
  o.config.main_process_port = 29400;
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->run_id, "accel-10.0.0.1-29400");
  EXPECT_EQ(staticPlacement(*p, 0).rank_offset, 2);
  EXPECT_EQ(p->local_world_size, 2);
  o.max_restarts = 1;
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->max_restarts, 1);
}

TEST_F(LaunchPlanTest, HangAndExitTimeoutsFromFlagsElseTheConfigFile) {
  testing::writeFile(
      dir_.file("c.yaml"),
      "distributed_type: MULTI_CPU\nnum_processes: 2\nhang_timeout: 300\nexit_timeout: 60\n");
  auto o = options();
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_FALSE(p->hang_timeout);  // off by default
  EXPECT_FALSE(p->exit_timeout);  // a notice only
  EXPECT_EQ(p->exit_notice, std::chrono::seconds(60));
  o.config.config_file = dir_.file("c.yaml");
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->hang_timeout, std::chrono::milliseconds(300000));
  EXPECT_EQ(p->exit_timeout, std::chrono::milliseconds(60000));
  o.hang_timeout_s = 2.5;
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->hang_timeout, std::chrono::milliseconds(2500));  // the flag wins
  EXPECT_EQ(p->exit_timeout, std::chrono::milliseconds(60000));
}

TEST_F(LaunchPlanTest, WorkersGetAccelerateVariablesFromTheConfig) {
  testing::writeFile(
      dir_.file("c.yaml"),
      "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: bf16\ngpu_ids: '0, 1'\n"
      "debug: true\nenable_cpu_affinity: true\ndynamo_config:\n  dynamo_backend: inductor\n"
      "  dynamo_mode: max-autotune\n  dynamo_use_fullgraph: true\n");
  auto o = options();
  o.config.config_file = dir_.file("c.yaml");
  o.gradient_accumulation_steps = 4;
  auto p = plan(o, 2, {"PATH=/usr/bin", "TORCH_NCCL_ASYNC_ERROR_HANDLING=0"});
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->common_env,
            (std::map<std::string, std::string>{
                {"ACCELERATE_CPU_AFFINITY", "1"},
                {"ACCELERATE_DEBUG_MODE", "true"},
                {"ACCELERATE_DYNAMO_BACKEND", "INDUCTOR"},
                {"ACCELERATE_DYNAMO_MODE", "max-autotune"},
                {"ACCELERATE_DYNAMO_USE_DYNAMIC", "False"},
                {"ACCELERATE_DYNAMO_USE_FULLGRAPH", "True"},
                {"ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False"},
                {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"},
                {"ACCELERATE_MIXED_PRECISION", "bf16"},
                {"CUDA_VISIBLE_DEVICES", "0,1"},
                {"NCCL_ASYNC_ERROR_HANDLING", "1"},  // the parent's TORCH_NCCL_... is kept
                {"PYTHONFAULTHANDLER", "1"},  // stacks of hung ranks (README: When a job hangs)
            }));
  // The user's own faulthandler setting stands.
  auto own = plan(o, 2, {"PATH=/usr/bin", "PYTHONFAULTHANDLER=0"});
  ASSERT_TRUE(own.ok()) << own.error();
  EXPECT_EQ(own->common_env.count("PYTHONFAULTHANDLER"), 0u);
  auto cpuOptions = options();
  cpuOptions.config.cpu = true;
  auto cpu = plan(cpuOptions);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  EXPECT_EQ(cpu->common_env.at("ACCELERATE_USE_CPU"), "True");
  EXPECT_EQ(cpu->common_env.at("ACCELERATE_DYNAMO_BACKEND"), "NO");
  EXPECT_EQ(cpu->common_env.count("KMP_AFFINITY"),
            0u);  // accelerate never sets it (see accelerate_env.cc)
  EXPECT_EQ(cpu->common_env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"),
            0u);  // one process: no torchrun agent's settings
}

TEST_F(LaunchPlanTest, RendezvousFlagsOnOneMachineAreNoticedAsIgnored) {
  auto o = options();
  o.rdzv_conf = "read_timeout=60,timeout=12.5,use_libuv=0";  // torch's keys, and accel's
  o.monitor_interval = 1;
  auto p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->round_timeouts.join, std::chrono::milliseconds(12500));
  EXPECT_EQ(p->notices,
            (std::vector<std::string>{
                "--monitor_interval is ignored: accel reacts to worker exits as they happen",
                "--rdzv_backend/--rdzv_conf/--rdzv_timeout have no effect on a single machine"}));
  o = options();
  o.rdzv_timeout_s = 3;  // the flag wins over --rdzv_conf
  o.rdzv_conf = "timeout=5";
  o.config.num_machines = 2;
  o.config.num_processes = 2;
  o.config.main_process_ip = "h";
  o.config.main_process_port = 1;
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->round_timeouts.join, std::chrono::milliseconds(3000));
  EXPECT_TRUE(p->notices.empty());
  // etcd across machines ranks the machines by arrival; a config file's job (no --rdzv_endpoint)
  // finds etcd at the main process's address and port, as accelerate passes them to torchrun.
  o.config.rdzv_backend = "etcd-v2";
  o.config.machine_rank = 1;
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->etcd_endpoints, "h:1");
  o.etcd_endpoints = "e1:2379,e2:2379";
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->rank_by_arrival);
  EXPECT_FALSE(p->machine_rank);
  EXPECT_EQ(p->etcd_endpoints, "e1:2379,e2:2379");
  EXPECT_EQ(p->notices, std::vector<std::string>{
                            "--node_rank/--machine_rank 1 has no effect with --rdzv_backend "
                            "etcd-v2: the machines are ranked in the order they join"});
  // etcd's TLS as torch's etcd backends take it; TLS files with TLS off are an error.
  o.rdzv_conf = "protocol=https,cacert=/ca.pem,cert=/c.pem,key=/c.key";
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->etcd_https);
  EXPECT_EQ(p->etcd_cacert, "/ca.pem");
  EXPECT_EQ(p->etcd_cert, "/c.pem");
  EXPECT_EQ(p->etcd_key, "/c.key");
  o.rdzv_conf = "cacert=/ca.pem";
  EXPECT_EQ(plan(o).error(),
            "--rdzv_conf cacert=/ca.pem is for TLS, which is off: add "
            "protocol=https (or give https:// endpoints)");
  o.rdzv_conf = "protocol=ftp";
  EXPECT_EQ(plan(o).error(), "--rdzv_conf: 'protocol=ftp' is not protocol=http|https");
  o.etcd_endpoints = "https://e1:2379,e2:2379";
  o.rdzv_conf = "cacert=/ca.pem";
  p = plan(o);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->etcd_https);
  o.rdzv_conf = "protocol=http";
  EXPECT_EQ(plan(o).error(),
            "--rdzv_conf protocol=http with an https:// --rdzv_endpoint "
            "(https://e1:2379,e2:2379): say one");
  o.rdzv_conf = "timeout=5";
  o.etcd_endpoints.reset();
  o.config.rdzv_backend.reset();
  o.config.machine_rank.reset();
  o.rdzv_timeout_s = 0;
  p = plan(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), "--rdzv_timeout: must be more than 0 seconds");
}

probes::Environment slurmStep(int nodeId, int tasks = 2, int procId = 0, int localId = 0) {
  return {"PATH=/usr/bin",
          "SLURM_JOB_ID=123457",
          "SLURM_STEP_ID=0",
          "SLURM_JOB_NODELIST=gpu[01-02]",
          "SLURM_STEP_NODELIST=gpu[01-02]",
          "SLURM_NNODES=2",
          "SLURM_NODEID=" + std::to_string(nodeId),
          "SLURM_NTASKS=" + std::to_string(tasks),
          "SLURM_PROCID=" + std::to_string(procId),
          "SLURM_LOCALID=" + std::to_string(localId),
          "SLURM_STEP_TASKS_PER_NODE=" + std::to_string(tasks / 2) + "(x2)",
          "SLURM_CPUS_ON_NODE=8",
          "SLURM_GPUS_ON_NODE=4"};
}

TEST_F(LaunchPlanTest, SlurmAgentPerNodeNeedsNoMachineFlags) {
  auto p = plan(options(), 0, slurmStep(1));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->scheduler, "SLURM");
  EXPECT_EQ(p->num_machines, 2);
  EXPECT_EQ(p->machine_rank, 1);
  EXPECT_EQ(p->world_size, 2);  // CPU job, no --num_processes: one rank per node
  EXPECT_EQ(staticPlacement(*p, 0).rank_offset, 1);
  EXPECT_EQ(p->master_addr, "gpu01");
  EXPECT_TRUE(p->master_addr_from_scheduler);
  EXPECT_EQ(p->master_port, 20000 + 123457 % 10000);
  EXPECT_EQ(p->run_id, "123457");
  EXPECT_EQ(p->omp_num_threads, 8);  // SLURM_CPUS_ON_NODE / one rank
  EXPECT_FALSE(p->exec_in_place);
}

// Under SLURM the scheduler ranks the machines: --rdzv_backend etcd is said to have no effect.
TEST_F(LaunchPlanTest, SlurmSaysEtcdHasNoEffect) {
  auto o = options();
  o.config.rdzv_backend = "etcd";
  o.etcd_endpoints = "e1:2379";
  auto p = plan(o, 0, slurmStep(1));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_FALSE(p->etcd_endpoints);
  EXPECT_EQ(p->machine_rank, 1);
  EXPECT_NE(std::find(p->notices.begin(), p->notices.end(),
                      "--rdzv_backend etcd has no effect under SLURM: SLURM gives each machine its "
                      "rank, and the job's store is machine 0's"),
            p->notices.end())
      << ::testing::PrintToString(p->notices);
}

TEST_F(LaunchPlanTest, SlurmGpuJobsGetOneRankPerGpuAndFlagsWin) {
  auto o = options();
  o.config.multi_gpu = true;
  auto p = plan(o, 4, slurmStep(0));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->world_size, 8);
  EXPECT_EQ(p->local_world_size, 4);
  EXPECT_EQ(p->omp_num_threads, 2);
  o.config.num_processes = 4;  // the total, as in accelerate
  o.config.main_process_ip = "10.0.0.1";
  o.config.main_process_port = 29400;
  p = plan(o, 4, slurmStep(0));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->local_world_size, 2);
  EXPECT_EQ(p->master_addr, "10.0.0.1");
  EXPECT_EQ(p->master_port, 29400);
}

TEST_F(LaunchPlanTest, SlurmMisuseIsExplained) {
  auto p = plan(options(), 0, slurmStep(0, /*tasks=*/4));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("srun started 4 tasks on 2 node(s)"), std::string::npos) << p.error();
  probes::Environment batch = {"SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=n[1-3]", "SLURM_NNODES=3",
                               "SLURM_NODEID=0"};
  p = plan(options(), 0, batch);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("srun --ntasks-per-node=1 accel launch"), std::string::npos)
      << p.error();
  auto o = options();
  o.no_spawn = true;
  p = plan(o, 0, {"PATH=/usr/bin"});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("--no_spawn: each task's rank comes from its scheduler"),
            std::string::npos)
      << p.error();
}

TEST_F(LaunchPlanTest, NoSpawnMakesTheTaskOneRank) {
  auto o = options();
  o.no_spawn = true;
  auto p = plan(o, 0, slurmStep(1, 4, /*procId=*/3, /*localId=*/1));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->exec_in_place);
  EXPECT_FALSE(p->agent_store);
  EXPECT_EQ(p->world_size, 4);
  EXPECT_EQ(p->local_world_size, 2);
  EXPECT_EQ(p->machine_rank, 1);
  EXPECT_EQ(p->exec_local_rank, 1);
  EXPECT_EQ(staticPlacement(*p, 0).globalRank(p->exec_local_rank), 3);
  EXPECT_EQ(p->master_addr, "gpu01");
  o.config.num_processes = 8;
  p = plan(o, 0, slurmStep(1, 4, 3, 1));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("--num_processes 8 disagrees with SLURM, which started 4 tasks"),
            std::string::npos)
      << p.error();
}

TEST_F(LaunchPlanTest, OpenMpiRanksAcrossNodesNeedTheMasterAddress) {
  probes::Environment env = {"PATH=/usr/bin", "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8",
                             "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4"};
  auto p = plan(options(), 0, env);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("--main_process_ip: required under Open MPI across 2 nodes"),
            std::string::npos)
      << p.error();
  auto o = options();
  o.config.main_process_ip = "node-a";
  p = plan(o, 0, env);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->exec_in_place);  // no --no_spawn needed under MPI
  EXPECT_EQ(staticPlacement(*p, 0).globalRank(p->exec_local_rank), 5);
  EXPECT_EQ(p->machine_rank, 1);
  EXPECT_EQ(p->master_addr, "node-a");
  EXPECT_EQ(p->master_port, 29500);  // no job id to derive one from
}

}  // namespace
}  // namespace accel::launcher

namespace accel::launcher {
namespace {

class LaunchPlanParadigmTest : public ::testing::Test {
 protected:
  Expected<LaunchPlan> plan(std::vector<std::string> args, int gpus,
                            LaunchMode mode = LaunchMode::Accelerate,
                            probes::Environment env = {"PATH=/usr/bin:/bin"}) {
    args.push_back("/bin/true");
    auto parsed = parseLaunchFlags(args, mode, env);
    if (!parsed) return std::move(parsed).takeError();
    auto o = launchOptionsFrom(std::move(*parsed));
    if (!o) return std::move(o).takeError();
    return makeLaunchPlan(*o, paths_, env, [gpus] { return gpus; });
  }
  std::string file(const std::string& name, const std::string& text) {
    testing::writeFile(dir_.file(name), text);
    return dir_.file(name);
  }
  testing::ScratchDir dir_;
  config::PathEnv paths_{dir_.path(), std::nullopt, "/root"};
};

TEST_F(LaunchPlanParadigmTest, FsdpDeepSpeedAndMegatronConfigsLaunchLikeMultiGpu) {
  const auto fsdp =
      file("fsdp.yaml",
           "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
           "  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
  auto p = plan({"--config_file", fsdp}, 2);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->accelerate_launcher, AccelerateLauncher::MultiGpu);
  EXPECT_EQ(p->world_size, 2);
  EXPECT_EQ(p->common_env.at("FSDP_VERSION"), "2");
  EXPECT_EQ(p->common_env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT");
  EXPECT_FALSE(
      plan({"--config_file", fsdp}, 1).ok());  // a GPU job: one GPU for two processes is refused
  const auto ds =
      file("ds.yaml",
           "distributed_type: DEEPSPEED\nnum_processes: 4\nnum_machines: 2\nmachine_rank: 1\n"
           "main_process_ip: 10.0.0.1\nmain_process_port: 29400\n"
           "deepspeed_config:\n  zero_stage: 2\n");
  p = plan({"--config_file", ds}, 2);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->accelerate_launcher, AccelerateLauncher::DeepSpeed);
  EXPECT_EQ(p->common_env.at("ACCELERATE_DEEPSPEED_ZERO_STAGE"), "2");
  EXPECT_EQ(p->common_env.at("ACCELERATE_CONFIG_DS_FIELDS"),
            "zero_stage");  // the file has no mixed_precision
  ASSERT_EQ(p->notices.size(), 1u);
  EXPECT_NE(
      p->notices[0].find("deepspeed_multinode_launcher pdsh: DeepSpeed's own multi-node launcher"),
      std::string::npos);
  p = plan({"--config_file", ds, "--deepspeed_multinode_launcher", "standard"}, 2);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->notices.empty());
  p = plan({"--use_megatron_lm", "--num_processes", "2", "--megatron_lm_pp_degree", "2"}, 2);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->common_env.at("MEGATRON_LM_PP_DEGREE"), "2");
  EXPECT_EQ(p->config.config.distributed_type, "MEGATRON_LM");
}

TEST_F(LaunchPlanParadigmTest, WithoutAConfigSeveralGpusTurnMultiGpuOnAsAccelerateDoes) {
  auto p = plan({"--num_processes", "2"}, 2);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->config.config.distributed_type, "MULTI_GPU");
  EXPECT_EQ(p->notices.size(), 1u);
  p = plan({"--num_processes", "2"}, 1);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->config.config.distributed_type, "NO");
  EXPECT_TRUE(p->torchrun_env);  // two processes: torchrun's variables (accelerate would start one)
}

TEST_F(LaunchPlanParadigmTest, TorchrunCountsPerMachineAndSetsNoAccelerateVariables) {
  auto p = plan(
      {"--nproc_per_node", "3", "--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1"},
      0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->world_size, 6);
  EXPECT_EQ(p->local_world_size, 3);
  EXPECT_EQ(staticPlacement(*p, 0).rank_offset, 3);
  EXPECT_EQ(p->master_port, 29500);  // torchrun's default port across machines
  EXPECT_EQ(p->omp_num_threads, 1);
  for (const auto& [key, value] : p->common_env)
    EXPECT_EQ(key.rfind("ACCELERATE_", 0), std::string::npos) << key;
  p = plan({"--nproc_per_node", "auto"}, 4, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->world_size, 4);
  p = plan({"--nproc_per_node", "gpu"}, 0, LaunchMode::Torchrun);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), "--nproc_per_node gpu: no GPU is usable on this machine");
  p = plan({"--rdzv_id", "job-42", "--nproc_per_node", "1"}, 0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->run_id, "job-42");
  EXPECT_TRUE(p->torchrun_env);  // torchrun gives even one process its variables
}

// torchrun's --nproc_per_node is 1 when not given, per machine: `torchrun --nnodes 2` (or 1:3)
// runs one process on each (it failed 'num_processes 1 (from default) is the total over all
// machines and must be at least num_machines 2').
TEST_F(LaunchPlanParadigmTest, TorchrunRunsOneProcessPerMachineByDefault) {
  for (const char* nnodes : {"2", "1:3"}) {
    auto p = plan({"--nnodes", nnodes, "--rdzv_backend", "c10d", "--rdzv_endpoint", "10.0.0.1"}, 0,
                  LaunchMode::Torchrun);
    ASSERT_TRUE(p.ok()) << nnodes << ": " << p.error();
    EXPECT_EQ(p->local_world_size, 1) << nnodes;
    EXPECT_EQ(p->world_size, p->num_machines) << nnodes;
  }
}

// torchrun's elastic command line: no --node_rank, so the rendezvous ranks the machines.
TEST_F(LaunchPlanParadigmTest, C10dWithoutNodeRankRanksMachinesByArrival) {
  auto p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", "10.0.0.1"},
                0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->rank_by_arrival);
  EXPECT_EQ(p->machine_rank,
            std::nullopt);  // until planLaunch knows whether it is the endpoint's host
  EXPECT_EQ(p->master_addr, "10.0.0.1");
  EXPECT_EQ(p->master_port, 29400);  // torch's default port of a c10d endpoint
  EXPECT_EQ(p->world_size, 4);
  EXPECT_FALSE(p->store_host_configured.has_value());
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            "h:7000", "--rdzv_conf", "join_timeout=30,is_host=No,read_timeout=5"},
           0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->master_port, 7000);
  EXPECT_EQ(p->store_host_configured, false);
  EXPECT_EQ(p->round_timeouts.join, std::chrono::seconds(30));
  // A given --node_rank is honoured (static ranks through the same rendezvous).
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--node_rank", "1", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", "h:7000"},
           0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_FALSE(p->rank_by_arrival);
  EXPECT_EQ(p->machine_rank, 1);
  EXPECT_EQ(staticPlacement(*p, 0).rank_offset, 2);
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            "h:7000", "--rdzv_conf", "is_host=maybe"},
           0, LaunchMode::Torchrun);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), "--rdzv_conf: 'is_host=maybe' is not is_host=true|false");
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "etcd"}, 0,
           LaunchMode::Torchrun);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "--rdzv_backend etcd needs --rdzv_endpoint HOST:PORT[,HOST:PORT...]: the client URLs "
            "of the etcd cluster the machines meet on");
  // On etcd (several endpoints of one cluster) the machines meet there, ranked by arrival.
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "etcd", "--rdzv_endpoint",
            "h1:2379,h2:2379"},
           0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->rank_by_arrival);
  EXPECT_EQ(p->etcd_endpoints, "h1:2379,h2:2379");
  EXPECT_EQ(p->rendezvous_notice,
            "--rdzv_backend etcd: the machines meet on etcd at h1:2379,h2:2379 (etcd's v3 API), "
            "ranked in the order they join; no machine is a single point of failure");
  // One machine: nothing to rank.
  p = plan({"--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "h:7000"}, 0,
           LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_FALSE(p->rank_by_arrival);
  EXPECT_EQ(p->machine_rank, 0);
}

// torch 2.12's --virtual_local_rank: LOCAL_RANK=0 for every worker, each seeing only its own GPU
// (the r-th of CUDA_VISIBLE_DEVICES, else GPU r); PET_VIRTUAL_LOCAL_RANK=1 does the same.
// --nnodes MIN:MAX: a group of MIN to MAX machines ranked by arrival, with torch's membership
// settings read from --rdzv_conf.
TEST_F(LaunchPlanParadigmTest, NnodesMinMaxIsAnElasticGroup) {
  auto p = plan({"--nproc_per_node", "2", "--nnodes", "2:3", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", "h:7000", "--rdzv_conf",
                 "last_call_timeout=2.5,keep_alive_interval=0.5,keep_alive_max_attempt=4,"
                 "close_timeout=12"},
                0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->elastic());
  EXPECT_EQ(p->min_machines, 2);
  EXPECT_EQ(p->num_machines, 3);
  EXPECT_EQ(p->round_timeouts.last_call, std::chrono::milliseconds(2500));
  EXPECT_EQ(p->round_timeouts.keep_alive_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(p->round_timeouts.keep_alive_misses, 4);
  EXPECT_EQ(p->round_timeouts.close, std::chrono::milliseconds(12000));
  EXPECT_EQ(p->round_timeouts.exit_after_failure, std::chrono::seconds(15));  // 5 s + 10 s
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            "h:7000"},
           0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_FALSE(p->elastic());
  EXPECT_EQ(p->round_timeouts.keep_alive_interval, std::chrono::seconds(1));  // accel's defaults
  EXPECT_EQ(p->round_timeouts.keep_alive_misses, 3);
  EXPECT_EQ(p->round_timeouts.last_call, std::chrono::seconds(30));  // torch's
  EXPECT_EQ(p->round_timeouts.close, std::chrono::seconds(35));      // --term_timeout + 30 s
  // --term_timeout (here from TORCH_ELASTIC_SHUTDOWN_TIMEOUT's place: the flag) moves both bounds.
  p = plan({"--nproc_per_node", "2", "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            "h:7000", "--term_timeout", "9"},
           0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->round_timeouts.close, std::chrono::seconds(39));
  EXPECT_EQ(p->round_timeouts.exit_after_failure, std::chrono::seconds(19));
  // Machine ranks that are asked for cannot follow a group that changes.
  p = plan({"--nproc_per_node", "2", "--nnodes", "1:3", "--node_rank", "1", "--rdzv_backend",
            "c10d", "--rdzv_endpoint", "h:7000"},
           0, LaunchMode::Torchrun);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "--nnodes 1:3: a group of machines that changes needs machines ranked by arrival "
            "(--rdzv_backend c10d with --rdzv_endpoint, and no --node_rank/--machine_rank)");
  p = plan({"--nproc_per_node", "2", "--nnodes", "1:3", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            "h:7000", "--rdzv_conf", "keep_alive_max_attempt=0"},
           0, LaunchMode::Torchrun);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "--rdzv_conf: 'keep_alive_max_attempt=0' is not keep_alive_max_attempt=N (1 to 1000)");
}

// torch's rule for --rdzv_conf (every item KEY=VALUE), and keys neither accel nor torch knows
// (a typo would silently keep the default) are errors naming the closest known key.
TEST_F(LaunchPlanTest, RendezvousConfItemsAreKeyValueAndKnownKeys) {
  auto error = [this](const std::string& conf) {
    auto o = options();
    o.rdzv_conf = conf;
    auto p = plan(o);
    return p.ok() ? std::string("accepted") : p.error();
  };
  EXPECT_EQ(error("keep_alive_intervall=5"),
            "--rdzv_conf: unknown key 'keep_alive_intervall'; did you mean 'keep_alive_interval'? "
            "(known: timeout, join_timeout, last_call_timeout, close_timeout, "
            "keep_alive_interval, keep_alive_max_attempt, is_host, read_timeout, use_libuv, rank, "
            "protocol, cacert, cert, key)");
  EXPECT_EQ(error("garbage").substr(0, 56),
            "--rdzv_conf: 'garbage' is not KEY=VALUE (the whole flag:");
  EXPECT_EQ(error(",,,"),
            "--rdzv_conf: '' is not KEY=VALUE (the whole flag: KEY=VALUE,KEY=VALUE,...)");
  EXPECT_EQ(error("timeout="),
            "--rdzv_conf: 'timeout=' is not KEY=VALUE (the whole flag: "
            "KEY=VALUE,KEY=VALUE,...)");
  EXPECT_EQ(error("zzz=1").substr(0, 44), "--rdzv_conf: unknown key 'zzz' (known: timeo");
  EXPECT_EQ(error(" timeout = 5 , is_host=1"), "accepted");
  EXPECT_EQ(error(""), "accepted");
}

TEST_F(LaunchPlanParadigmTest, VirtualLocalRankGivesEachWorkerItsGpuAsDeviceZero) {
  auto variables = [](const LaunchPlan& p, int lr) {
    return launcherVariableMap(p, staticPlacement(p, 1234), WorkerSlot{lr, 0, ""});
  };
  const std::vector<std::string> args = {"--virtual_local_rank", "--nproc_per_node", "3"};
  auto p = plan(args, 0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  for (int lr = 0; lr < 3; ++lr) {
    EXPECT_EQ(variables(*p, lr).at("LOCAL_RANK"), "0");
    EXPECT_EQ(variables(*p, lr).at("RANK"), std::to_string(lr));
    EXPECT_EQ(variables(*p, lr).at("CUDA_VISIBLE_DEVICES"), std::to_string(lr));
  }
  p = plan(args, 0, LaunchMode::Torchrun, {"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=4, 6,7"});
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(variables(*p, 1).at("CUDA_VISIBLE_DEVICES"), "6");
  EXPECT_EQ(variables(*p, 2).at("CUDA_VISIBLE_DEVICES"), "7");
  p = plan(args, 0, LaunchMode::Torchrun, {"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=4,6"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "--virtual_local_rank: local rank 2 has no GPU of its own in CUDA_VISIBLE_DEVICES=4,6 "
            "(2 for 3 processes)");
  p = plan({"--nproc_per_node", "2"}, 0, LaunchMode::Torchrun,
           {"PATH=/usr/bin:/bin", "PET_VIRTUAL_LOCAL_RANK=1"});
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(variables(*p, 1).at("LOCAL_RANK"), "0");
  p = plan({"--nproc_per_node", "2"}, 0, LaunchMode::Torchrun);  // without it: torchrun's
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(variables(*p, 1).at("LOCAL_RANK"), "1");
  EXPECT_EQ(variables(*p, 1).count("CUDA_VISIBLE_DEVICES"), 0u);
}

// torch 2.12's --shutdown_timeout is --term_timeout in whole seconds; without either flag,
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT gives it (else accel's 5 s).
TEST_F(LaunchPlanParadigmTest, ShutdownTimeoutIsTheGracePeriod) {
  using std::chrono::milliseconds;
  auto p = plan({"--shutdown_timeout", "2"}, 0, LaunchMode::Torchrun);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->term_timeout, milliseconds(2000));
  const probes::Environment env = {"PATH=/usr/bin:/bin", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=9"};
  p = plan({"--nproc_per_node", "1"}, 0, LaunchMode::Torchrun, env);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->term_timeout, milliseconds(9000));
  p = plan({"--term_timeout", "1.5"}, 0, LaunchMode::Accelerate, env);  // a flag wins
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->term_timeout, milliseconds(1500));
  p = plan({}, 0, LaunchMode::Accelerate);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->term_timeout, milliseconds(5000));
  p = plan({"--shutdown_timeout", "3", "--term_timeout", "4"}, 0, LaunchMode::Torchrun);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "--term_timeout 4.0 and --shutdown_timeout 3 contradict each other (they name the "
            "same setting)");
  p = plan({"--nproc_per_node", "1"}, 0, LaunchMode::Torchrun,
           {"PATH=/usr/bin:/bin", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(),
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT: 'soon' is not a number of seconds (0 or more)");
}

}  // namespace
}  // namespace accel::launcher
