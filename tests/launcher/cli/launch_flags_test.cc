// The flag table and its argparse-like parser: spellings, prefixes, value conversion as in
// accelerate's and torchrun's Python parsers, and the options built from them.
#include "launcher/cli/launch_flags.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "launcher/cli/options_from_flags.h"
#include "launcher/plan/python_str.h"

namespace accel::launcher {
namespace {

using nlohmann::json;

ParsedLaunchFlags parse(std::vector<std::string> args, LaunchMode mode = LaunchMode::Accelerate,
                        probes::Environment env = {}) {
  auto parsed = parseLaunchFlags(args, mode, env);
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  return parsed.ok() ? *parsed : ParsedLaunchFlags{};
}

std::string parseError(std::vector<std::string> args, LaunchMode mode = LaunchMode::Accelerate) {
  auto parsed = parseLaunchFlags(args, mode, {});
  EXPECT_FALSE(parsed.ok());
  return parsed.ok() ? "" : parsed.error();
}

TEST(LaunchFlagsTest, EverySpellingOfALongFlagAndTheCommandUntouched) {
  for (const char* spelling :
       {"--num_processes", "--num-processes", "--num_proc", "--num-p", "-n"}) {
    auto p = parse({spelling, "4", "train.py", "--num_processes", "9", "--", "x"});
    EXPECT_EQ(p.values.at("num_processes"), 4) << spelling;
    EXPECT_TRUE(p.isGiven("num_processes"));
    EXPECT_EQ(p.command, (std::vector<std::string>{"train.py", "--num_processes", "9", "--", "x"}))
        << spelling;
  }
  auto p = parse({"--mixed_precision=bf16", "-t3", "--", "-weird-name"});
  EXPECT_EQ(p.values.at("mixed_precision"), "bf16");
  EXPECT_EQ(p.values.at("tee"), "3");
  EXPECT_EQ(p.command, std::vector<std::string>{"-weird-name"});
  EXPECT_EQ(p.nameOf("mixed_precision"), "--mixed_precision");
}

TEST(LaunchFlagsTest, DefaultsAreAccelerates) {
  auto p = parse({"train.py"});
  EXPECT_TRUE(p.given.empty());
  EXPECT_EQ(p.values.at("fsdp_min_num_params"), 100000000);
  EXPECT_EQ(p.values.at("fsdp_offload_params"), "false");          // type=str: stays text
  EXPECT_EQ(p.values.at("fp8_enable_fsdp_float8_all_gather"), 1);  // "true" through str_to_bool
  EXPECT_EQ(p.values.at("fp8_override_linear_precision"), json::parse("[false, false, false]"));
  EXPECT_EQ(p.values.at("megatron_lm_gradient_clipping"), 1.0);
  EXPECT_EQ(p.values.at("debug"), nullptr);  // parser-level store_true: None, so the config decides
  EXPECT_EQ(p.values.at("cpu"), false);
  EXPECT_EQ(p.values.at("tpu_use_cluster"),
            false);  // --tpu_cluster's default, not --no_tpu_cluster's
  EXPECT_EQ(p.values.at("tee"), "0");
}

TEST(LaunchFlagsTest, ValuesConvertAsPythonDoes) {
  auto p = parse({"--num_processes", " 1_000 ", "--gradient_clipping", "1", "--zero_stage=+2",
                  "--megatron_lm_no_load_optim", "False", "--fp8_override_linear_precision",
                  "yes,0,off", "--fp8_pad_inner_dim", "OFF", "--monitor_interval", "2e-1", "x"});
  EXPECT_EQ(p.values.at("num_processes"), 1000);
  EXPECT_EQ(p.values.at("gradient_clipping"), 1.0);
  EXPECT_EQ(pythonStr(p.values.at("gradient_clipping")), "1.0");
  EXPECT_EQ(p.values.at("zero_stage"), 2);
  EXPECT_EQ(p.values.at("megatron_lm_no_load_optim"), true);  // bool("False") is True in argparse
  EXPECT_EQ(p.values.at("fp8_override_linear_precision"), json::parse("[1, 0, 0]"));
  EXPECT_EQ(p.values.at("fp8_pad_inner_dim"), 0);
  EXPECT_DOUBLE_EQ(p.values.at("monitor_interval").get<double>(), 0.2);
  EXPECT_EQ(parseError({"--num_processes", "1.5", "x"}),
            "--num_processes: '1.5' is not an integer");
  EXPECT_EQ(parseError({"--num_processes", "0x10", "x"}),
            "--num_processes: '0x10' is not an integer");
  EXPECT_EQ(parseError({"--gradient_clipping", "0x1p3", "x"}),
            "--gradient_clipping: '0x1p3' is not a number");
  EXPECT_EQ(parseError({"--fp8_pad_inner_dim", "maybe", "x"}),
            "--fp8_pad_inner_dim: 'maybe' is not a truth value (yes/no, true/false, on/off, 1/0)");
  EXPECT_EQ(parseError({"--mixed_precision", "fp32", "x"}),
            "--mixed_precision: 'fp32' is not one of no, fp16, bf16, fp8");
  EXPECT_EQ(parseError({"--dynamo_mode", "fast", "x"}),
            "--dynamo_mode: 'fast' is not one of default, reduce-overhead, max-autotune");
}

TEST(LaunchFlagsTest, BadCommandLinesNameTheFlag) {
  EXPECT_EQ(parseError({"--frobnicate", "x"}),
            "unknown flag --frobnicate (flags go before the training script; see --help)");
  EXPECT_EQ(parseError({"--num_procs", "2", "x"}),
            "unknown flag --num_procs (did you mean --num_processes?)");
  EXPECT_EQ(parseError({"--num", "2", "x"}),
            "--num: ambiguous, it could be --num_cpu_threads_per_process, --num_machines, "
            "--num_processes, "
            "--numa_binding");
  EXPECT_EQ(parseError({"--num_processes"}), "--num_processes: expected a value");
  EXPECT_EQ(parseError({"--num_processes", "--cpu", "x"}), "--num_processes: expected a value");
  EXPECT_EQ(parseError({"--cpu=yes", "x"}), "--cpu: takes no value (got 'yes')");
  // torchrun's command line has torchrun's flags only.
  EXPECT_EQ(parseError({"--num_processes", "2", "x"}, LaunchMode::Torchrun),
            "unknown flag --num_processes: torchrun has no such flag (accel launch takes it)");
}

TEST(LaunchFlagsTest, TorchrunTakesPetVariablesAsDefaults) {
  auto p = parse({"x"}, LaunchMode::Torchrun,
                 {"PET_NPROC_PER_NODE=3", "PET_STANDALONE=1", "PET_MAX_RESTARTS=2"});
  EXPECT_EQ(p.values.at("nproc_per_node"), "3");
  EXPECT_EQ(p.values.at("standalone"), true);
  EXPECT_EQ(p.values.at("max_restarts"), 2);
  EXPECT_EQ(p.nameOf("nproc_per_node"), "PET_NPROC_PER_NODE");
  auto flagWins =
      parse({"--nproc-per-node", "2", "x"}, LaunchMode::Torchrun, {"PET_NPROC_PER_NODE=3"});
  EXPECT_EQ(flagWins.values.at("nproc_per_node"), "2");
  auto accelerate = parse({"x"}, LaunchMode::Accelerate, {"PET_NPROC_PER_NODE=3"});
  EXPECT_EQ(accelerate.values.at("nproc_per_node"), nullptr);
}

TEST(LaunchFlagsTest, PythonStrOfValues) {
  EXPECT_EQ(pythonStr(json(true)), "True");
  EXPECT_EQ(pythonStr(json(nullptr)), "None");
  EXPECT_EQ(pythonStr(json(1.0)), "1.0");
  EXPECT_EQ(pythonStr(json(0.1)), "0.1");
  EXPECT_EQ(pythonStr(json(1e-5)), "1e-05");
  EXPECT_EQ(pythonStr(json(0.0001)), "0.0001");
  EXPECT_EQ(pythonStr(json(1e16)), "1e+16");
  EXPECT_EQ(pythonStr(json(123456789012345.0)), "123456789012345.0");
  EXPECT_EQ(pythonStr(json(-2.5e-7)), "-2.5e-07");
  EXPECT_EQ(pythonStr(json::parse(R"(["BertLayer", "it's"])")), R"(['BertLayer', "it's"])");
}

TEST(LaunchFlagsTest, HelpAllListsEveryFlagOfTheModeInGroups) {
  const std::string help = *launchHelp(LaunchMode::Accelerate, "all");
  for (const auto& f : launchFlags())
    EXPECT_NE(help.find("  " + std::string(f.names.front())), std::string::npos) << f.names.front();
  size_t at = 0;
  for (const char* title : {"\nGeneral (--help-general):", "\nHardware selection",
                            "\nResource selection", "\ntorch dynamo", "\nTraining paradigm",
                            "\nDistributed:", "\ntorchrun's own", "\nDeepSpeed", "\nFSDP",
                            "\nMegatron-LM", "\nfp8", "\nParallelism config", "\naccel's own"}) {
    const size_t found = help.find(title, at);
    ASSERT_NE(found, std::string::npos) << title << " missing or out of order";
    at = found;
  }
  const std::string torchrun = *launchHelp(LaunchMode::Torchrun, "all");
  EXPECT_NE(torchrun.find("--nproc_per_node"), std::string::npos);
  EXPECT_EQ(torchrun.find("--use_fsdp"), std::string::npos);
}

// The short help: the groups most jobs need in full, one line for each of the others.
TEST(LaunchFlagsTest, ShortHelpNamesTheOtherGroups) {
  const std::string help = *launchHelp(LaunchMode::Accelerate);
  EXPECT_LT(std::count(help.begin(), help.end(), '\n'), 120) << help;
  EXPECT_NE(help.find("  --num_processes, -n NUM_PROCESSES\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --hang_timeout HANG_TIMEOUT "), std::string::npos) << help;
  EXPECT_NE(help.find("  --mixed_precision {no,fp16,bf16,fp8}\n"), std::string::npos) << help;
  EXPECT_EQ(help.find("--fsdp_sharding_strategy"), std::string::npos) << help;
  EXPECT_NE(help.find("  FSDP: "), std::string::npos) << help;
  EXPECT_NE(help.find(" flags, --help-fsdp\n"), std::string::npos) << help;
  const std::string fsdp = *launchHelp(LaunchMode::Accelerate, "fsdp");
  EXPECT_NE(fsdp.find("--fsdp_sharding_strategy"), std::string::npos);
  EXPECT_EQ(fsdp.find("--num_processes"), std::string::npos);
  EXPECT_FALSE(launchHelp(LaunchMode::Accelerate, "fdsp").has_value());
}

Expected<LaunchOptions> options(std::vector<std::string> args,
                                LaunchMode mode = LaunchMode::Accelerate) {
  auto parsed = parseLaunchFlags(args, mode, {});
  if (!parsed) return std::move(parsed).takeError();
  return launchOptionsFrom(std::move(*parsed));
}

TEST(LaunchOptionsTest, TorchrunSpellingsMapOntoAccelerates) {
  auto o = options({"--nnodes", "2", "--node-rank", "1", "--master_addr", "10.0.0.1",
                    "--master_port", "29400", "--nproc_per_node", "gpu", "--rdzv_id", "job7", "x"});
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_EQ(o->config.num_machines, 2);
  EXPECT_EQ(o->config.machine_rank, 1);
  EXPECT_EQ(o->config.main_process_ip, "10.0.0.1");
  EXPECT_EQ(o->config.main_process_port, 29400);
  EXPECT_EQ(o->nproc_per_node, "gpu");
  EXPECT_EQ(o->rdzv_id, "job7");
  auto endpoint = options({"--rdzv_endpoint", "[::1]:1234", "x"});
  ASSERT_TRUE(endpoint.ok()) << endpoint.error();
  EXPECT_EQ(endpoint->config.main_process_ip, "::1");
  EXPECT_EQ(endpoint->config.main_process_port, 1234);
  auto elastic = options({"--nnodes", "1:4", "x"});
  ASSERT_TRUE(elastic.ok()) << elastic.error();
  EXPECT_EQ(elastic->config.num_machines, 4);  // MAX, and MIN apart
  EXPECT_EQ(elastic->min_machines, 1);
  EXPECT_TRUE(elastic->notices.empty());
  auto fixed = options({"--nnodes", "3:3", "x"});
  ASSERT_TRUE(fixed.ok()) << fixed.error();
  EXPECT_EQ(fixed->config.num_machines, 3);
  EXPECT_FALSE(fixed->min_machines.has_value());
  auto standalone = options({"--standalone", "x"}, LaunchMode::Torchrun);
  ASSERT_TRUE(standalone.ok()) << standalone.error();
  EXPECT_EQ(standalone->config.main_process_port, 0);
}

// --redirects/--tee keep torchrun's text (checked against the local world size by the plan);
// --console_streams is accel's 0-3 mask.
TEST(LaunchOptionsTest, StreamFlagsReachTheOptions) {
  auto o =
      options({"--tee", "0:3,1:1", "-r", "2", "--console_streams", "1", "x"}, LaunchMode::Torchrun);
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_EQ(o->tee, "0:3,1:1");
  EXPECT_EQ(o->redirects, "2");
  EXPECT_EQ(o->console_streams, 1);
  auto plain = options({"x"});
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_FALSE(plain->tee || plain->redirects || plain->console_streams);
  auto bad = options({"--console_streams", "4", "x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "--console_streams: 4 is out of range 0..3");
}

// One rule per range, applied where the flag is read (the planner trusts LaunchOptions).
TEST(LaunchOptionsTest, AgentFlagRangesAreCheckedWhereTheyAreRead) {
  auto error = [](std::vector<std::string> args) {
    args.push_back("x");
    auto o = options(std::move(args));
    return o.ok() ? std::string("accepted") : o.error();
  };
  EXPECT_EQ(error({"--console_streams", "4"}), "--console_streams: 4 is out of range 0..3");
  EXPECT_EQ(error({"--max_restarts", "-1"}), "--max_restarts: -1 is out of range 0..1048576");
  EXPECT_EQ(error({"--straggler_threshold", "1.5"}),
            "--straggler_threshold: 1.5 is out of range 0.0..1.0");
  EXPECT_EQ(error({"--straggler_window", "1"}), "--straggler_window: 1 is out of range 2..1048576");
  EXPECT_EQ(error({"--health_check_dirs", "/ckpt,,/data"}),
            "--health_check_dirs: an empty directory in '/ckpt,,/data'");
  EXPECT_EQ(error({"--straggler_action", "kick"}),
            "--straggler_action: 'kick' is not one of warn, exclude");
  EXPECT_EQ(error({"--num_cpu_threads_per_process", "0"}),
            "--num_cpu_threads_per_process: 0 is out of range 1..65536");
  EXPECT_EQ(error({"--gradient_accumulation_steps", "0"}),
            "--gradient_accumulation_steps: 0 is out of range 1..1073741824");
  EXPECT_EQ(error({"--term_timeout", "-1"}), "--term_timeout: must be 0 or more");
  EXPECT_EQ(error({"--max_restarts", "3"}), "accepted");
}

// torchrun's comma_separated_list: ",," is a comma inside an item; "" is one empty item.
TEST(LaunchOptionsTest, DuplicateFiltersAreCommaSeparatedAsTorchrunReadsThem) {
  auto o = options(
      {"--duplicate_stdout_filters", "apple,,pie,orange", "--duplicate-stderr-filters", "", "x"});
  ASSERT_TRUE(o.ok()) << o.error();
  EXPECT_EQ(o->duplicate_filters[0], (std::vector<std::string>{"apple,pie", "orange"}));
  EXPECT_EQ(o->duplicate_filters[1], (std::vector<std::string>{""}));
  auto none = options({"x"});
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_TRUE(none->duplicate_filters[0].empty() && none->duplicate_filters[1].empty());
}

TEST(LaunchOptionsTest, ContradictionsAndRefusalsNameTheFlags) {
  auto error = [](std::vector<std::string> args) {
    auto o = options(std::move(args));
    EXPECT_FALSE(o.ok());
    return o.ok() ? std::string() : o.error();
  };
  EXPECT_EQ(
      error({"--node_rank", "1", "--machine_rank", "0", "x"}),
      "--node_rank 1 and --machine_rank 0 contradict each other (they name the same setting)");
  EXPECT_EQ(error({"--nnodes", "2", "--num_machines", "3", "x"}),
            "--nnodes 2 and --num_machines 3 contradict each other (they name the same setting)");
  EXPECT_EQ(error({"--rdzv_endpoint", "a:1", "--master_port", "2", "x"}),
            "--rdzv_endpoint a:1 and --main_process_port/--master_port 2 contradict each other");
  EXPECT_EQ(error({"--nnodes", "3:2", "x"}),
            "--nnodes: '3:2' is not N or MIN:MAX with 0 < MIN <= MAX");
  EXPECT_EQ(error({"--nproc_per_node", "many", "x"}),
            "--nproc_per_node: 'many' is not a positive count, auto, gpu or cpu");
  EXPECT_EQ(
      error({"--tpu", "x"}),
      "--tpu: TPU (XLA) jobs are launched by torch_xla; accel launches CPU and CUDA GPU jobs");
  EXPECT_EQ(error({"--cpu", "--use_fsdp", "x"}),
            "You can only use one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, "
            "`--use_fsdp` at a time.");
  EXPECT_EQ(error({"--multi_gpu", "--num_processes", "1", "x"}),
            "You need to use at least 2 processes to use `--multi_gpu`.");
  EXPECT_EQ(
      error({"--use_fsdp", "--use_parallelism_config", "x"}),
      "You cannot use `--use_parallelism_config` without `--use_fsdp` and `--fsdp_version=2`.");
  auto ignored =
      options({"--aws_access_key_id", "K", "--downcast_bf16", "--start_method", "fork", "x"});
  ASSERT_TRUE(ignored.ok()) << ignored.error();
  EXPECT_EQ(ignored->notices.size(), 3u);
  EXPECT_NE(
      ignored->notices[0].find("--aws_access_key_id is ignored: only SageMaker launches read it"),
      std::string::npos);
}

}  // namespace
}  // namespace accel::launcher

namespace accel::launcher {
namespace {

// README.md's flag table is the table itself: a flag added, removed or reworded in
// launcher/cli/flag_table.cc without the README fails here (paste the printed block between the
// flags:begin/flags:end markers).
TEST(LaunchFlagsTest, ReadmeTableIsTheFlagTable) {
  std::ifstream in(ACCEL_README);
  ASSERT_TRUE(in) << "cannot read " << ACCEL_README;
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t begin = readme.find("<!-- flags:begin");
  const size_t end = readme.find("<!-- flags:end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const size_t first = readme.find('\n', begin) + 1;
  EXPECT_EQ(readme.substr(first, end - first), launchFlagsMarkdown());
}

}  // namespace
}  // namespace accel::launcher

namespace accel::launcher {
namespace {

// The spec whose names include `option` exactly, its dash spelling included, or nullptr.
const FlagSpec* specNamed(const std::string& option) {
  for (const FlagSpec& f : launchFlags()) {
    for (std::string_view name : f.names) {
      std::string dashed(name);
      if (dashed.rfind("--", 0) == 0) std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
      if (option == name || option == dashed) return &f;
    }
  }
  return nullptr;
}

// Every option of `accelerate launch` at each recorded tag (its own parser, recorded by
// scripts/accelerate_fixtures into config_keys.json "launch_flags") is in the table under
// accelerate's dest and arity, and parses: none is ever "unknown flag".
TEST(LaunchFlagsTest, EveryOptionOfEachRecordedAccelerateParses) {
  const std::map<std::string, FlagArity> arityOf = {{"_StoreAction", FlagArity::Value},
                                                    {"_StoreTrueAction", FlagArity::Switch},
                                                    {"_StoreFalseAction", FlagArity::SwitchFalse},
                                                    {"_StoreConstAction", FlagArity::SwitchFalse},
                                                    {"_AppendAction", FlagArity::Append}};
  int options = 0;
  std::vector<std::string> tags;  // every recorded tag: v0.27.2, v1.14.0, ...
  for (const auto& entry : std::filesystem::directory_iterator(ACCEL_FIXTURES)) {
    if (entry.path().filename().string().rfind("v", 0) == 0)
      tags.push_back(entry.path().filename());
  }
  ASSERT_GE(tags.size(), 2u);
  for (const std::string& tag : tags) {
    std::ifstream in(std::string(ACCEL_FIXTURES) + "/" + tag + "/config_keys.json");
    ASSERT_TRUE(in) << "cannot read the " << tag << " fixtures";
    const json recorded = json::parse(in);
    ASSERT_GE(recorded.at("launch_flags").size(), 70u) << tag;
    for (const json& flag : recorded.at("launch_flags")) {
      const std::string dest = flag.at("dest"), kind = flag.at("kind");
      if (flag.at("options").empty() || dest == "help") continue;  // the training command; -h
      for (const std::string option : flag.at("options")) {
        ++options;
        const FlagSpec* spec = specNamed(option);
        ASSERT_NE(spec, nullptr) << tag << ": " << option << " is not in the table";
        EXPECT_EQ(spec->dest, dest) << tag << ": " << option;
        ASSERT_TRUE(arityOf.count(kind)) << tag << ": " << option << " is a " << kind;
        EXPECT_EQ(spec->arity, arityOf.at(kind)) << tag << ": " << option << " (" << kind << ")";
        std::vector<std::string> args = {option};
        if (spec->arity == FlagArity::Value || spec->arity == FlagArity::Append) {
          args.push_back(flag.at("choices").is_array() ? flag.at("choices")[0].dump() : "1");
          if (flag.at("choices").is_array() && flag.at("choices")[0].is_string())
            args.back() = flag.at("choices")[0];
        }
        args.push_back("train.py");
        auto parsed = parseLaunchFlags(args, LaunchMode::Accelerate, {});
        ASSERT_TRUE(parsed.ok()) << tag << ": " << parsed.error();
        EXPECT_TRUE(parsed->isGiven(dest)) << tag << ": " << option;
      }
    }
  }
  EXPECT_GE(options, 200);  // both tags' spellings
}

}  // namespace
}  // namespace accel::launcher
