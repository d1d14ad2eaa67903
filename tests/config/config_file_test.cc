#include "config/config_file.h"

#include <dirent.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "tests/config/test_util.h"

namespace accel::config {
namespace {

using nlohmann::json;

// accelerate's interactive output for multi-CPU, 1 machine, 4 processes (reference §1.4a).
constexpr const char* kAccelerateMultiCpu = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_CPU
downcast_bf16: 'no'
enable_cpu_affinity: false
machine_rank: 0
main_training_function: main
mixed_precision: 'no'
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: true
)";

// accelerate's `config default` output on a CPU-only machine: JSON in a .yaml file (§1.5).
constexpr const char* kAccelerateDefaultJson = R"({
  "compute_environment": "LOCAL_MACHINE",
  "debug": false,
  "distributed_type": "NO",
  "downcast_bf16": false,
  "enable_cpu_affinity": false,
  "machine_rank": 0,
  "main_training_function": "main",
  "mixed_precision": "no",
  "num_machines": 1,
  "num_processes": 1,
  "rdzv_backend": "static",
  "same_network": false,
  "tpu_use_cluster": false,
  "tpu_use_sudo": false,
  "use_cpu": true
}
)";

// accelerate's tests/test_configs/0_28_0_mpi.yaml: 4 machines, 16 processes, nested sections.
constexpr const char* kAccelerateMpi = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_CPU
downcast_bf16: 'no'
ipex_config:
  ipex: true
machine_rank: 0
main_process_ip: 127.0.0.1
main_process_port: 29500
main_training_function: main
mixed_precision: 'no'
mpirun_config:
  mpirun_ccl: '1'
  mpirun_hostfile: /home/user/hostfile
num_machines: 4
num_processes: 16
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: true
)";

std::string parseError(const std::string& text) {
  auto r = parseConfig(text, "cfg.yaml");
  EXPECT_FALSE(r.ok()) << "expected an error for:\n" << text;
  return r.ok() ? "" : r.error();
}

TEST(ConfigFileTest, AccelerateYamlRoundTripsByteForByte) {
  auto c = parseConfig(kAccelerateMultiCpu, "a.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->distributed_type, "MULTI_CPU");
  EXPECT_EQ(c->num_processes, 4);
  EXPECT_TRUE(c->use_cpu);
  EXPECT_TRUE(c->same_network);
  EXPECT_EQ(c->mixed_precision, "no");
  EXPECT_EQ(renderYaml(c->toDocument()), kAccelerateMultiCpu);
}

TEST(ConfigFileTest, AccelerateMpiFixtureRoundTripsWithNestedSections) {
  // accelerate's own `config update` adds the missing enable_cpu_affinity: false; so do we.
  auto c = parseConfig(kAccelerateMpi, "mpi.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->num_machines, 4);
  EXPECT_EQ(c->num_processes, 16);
  EXPECT_EQ(c->main_process_ip, "127.0.0.1");
  EXPECT_EQ(c->main_process_port, 29500);
  EXPECT_EQ(c->extras.at("mpirun_config").at("mpirun_ccl"), "1");  // quoted: stays a string
  std::string expected = kAccelerateMpi;
  expected.insert(expected.find("ipex_config"), "enable_cpu_affinity: false\n");
  EXPECT_EQ(renderYaml(c->toDocument()), expected);
}

TEST(ConfigFileTest, AccelerateDefaultJsonLoadsAndRendersIdentically) {
  auto c = parseConfig(kAccelerateDefaultJson, "default_config.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->distributed_type, "NO");
  EXPECT_EQ(c->extras.at("downcast_bf16"), false);
  EXPECT_EQ(renderJson(c->toDocument()), kAccelerateDefaultJson);
}

TEST(ConfigFileTest, OldFileWithNullsAndEmptySections) {
  // accelerate's tests/test_configs/0_11_0.yaml
  auto c = parseConfig(
      "compute_environment: LOCAL_MACHINE\ndeepspeed_config: {}\ndistributed_type: "
      "'NO'\nfsdp_config: {}\n"
      "machine_rank: 0\nmain_process_ip: null\nmain_process_port: null\nmain_training_function: "
      "main\n"
      "mixed_precision: 'no'\nnum_machines: 1\nnum_processes: 1\nuse_cpu: false",
      "0_11_0.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  auto doc = c->toDocument();
  EXPECT_EQ(doc.count("main_process_ip"), 0u);
  EXPECT_EQ(doc.count("deepspeed_config"), 0u);  // empty dicts are dropped, as accelerate does
}

TEST(ConfigFileTest, MigratesLegacyFp16AndDynamoBackend) {
  auto c = parseConfig(
      "distributed_type: MULTI_GPU\nnum_processes: 2\nfp16: true\ndynamo_backend: INDUCTOR\n",
      "old.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->mixed_precision, "fp16");
  EXPECT_EQ(c->compute_environment, "LOCAL_MACHINE");
  auto doc = c->toDocument();
  EXPECT_EQ(doc.count("fp16"), 0u);
  EXPECT_EQ(doc.count("dynamo_backend"), 0u);
  EXPECT_EQ(doc.at("dynamo_config"), (json{{"dynamo_backend", "INDUCTOR"}}));

  auto off = parseConfig("distributed_type: 'NO'\ndynamo_backend: 'NO'\n", "old.yaml");
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_EQ(off->toDocument().count("dynamo_config"), 0u);
  EXPECT_EQ(off->num_processes, 1);  // NO without num_processes → 1
}

TEST(ConfigFileTest, UnquotedNoIsReadAsText) {
  // PyYAML would read these as False; their meaning is not in doubt, so accept them.
  auto c = parseConfig("distributed_type: NO\nmixed_precision: no\n", "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->distributed_type, "NO");
  EXPECT_EQ(c->mixed_precision, "no");
}

TEST(ConfigFileTest, UnknownKeyNamesPositionAndSuggests) {
  EXPECT_EQ(parseError("distributed_type: 'NO'\nnum_procesess: 2\n"),
            "cfg.yaml:2:1: unknown key 'num_procesess'; did you mean 'num_processes'?");
  EXPECT_EQ(parseError("distributed_type: 'NO'\n  \nfoo_bar_baz_qux: 1\n"),
            "cfg.yaml:3:1: unknown key 'foo_bar_baz_qux'");
}

TEST(ConfigFileTest, WrongTypesNameKeyAndPosition) {
  EXPECT_EQ(parseError("distributed_type: 'NO'\nnum_processes: four\n"),
            "cfg.yaml:2:16: 'num_processes' must be an integer, not 'four'");
  EXPECT_EQ(parseError("distributed_type: 'NO'\nnum_processes: '4'\n"),
            "cfg.yaml:2:16: 'num_processes' must be an integer, not '4'");
  EXPECT_EQ(parseError("distributed_type: 'NO'\nuse_cpu: maybe\n"),
            "cfg.yaml:2:10: 'use_cpu' must be true or false, not 'maybe'");
  EXPECT_EQ(parseError("distributed_type: 'NO'\nfsdp_config: [1, 2]\n"),
            "cfg.yaml:2:14: 'fsdp_config' must be a mapping, not a list");
  EXPECT_EQ(parseError("distributed_type: [a]\n"),
            "cfg.yaml:1:19: 'distributed_type' must be a string, not a list");
}

TEST(ConfigFileTest, OutOfRangeAndBadChoices) {
  EXPECT_EQ(parseError("distributed_type: 'NO'\nmain_process_port: 70000\n"),
            "cfg.yaml:2:20: 'main_process_port' is 70000, out of range 0..65535");
  EXPECT_EQ(parseError("distributed_type: MULTI_CPU\nnum_processes: 0\n"),
            "cfg.yaml:2:16: 'num_processes' is 0, out of range 1..1048576 (or -1 for unset)");
  EXPECT_EQ(parseError("distributed_type: 'NO'\nmixed_precision: fp32\n"),
            "cfg.yaml:2:18: 'mixed_precision' is 'fp32', must be one of no, fp16, bf16, fp8");
  EXPECT_EQ(
      parseError(
          "distributed_type: MULTI_GPU\nnum_machines: 2\nmachine_rank: 2\nnum_processes: 4\n"),
      "cfg.yaml:3:1: 'machine_rank' is 2 but 'num_machines' is 2; machine_rank must be below "
      "num_machines");
  EXPECT_EQ(parseError("distributed_type: MULTI_GPU\nnum_machines: 4\nnum_processes: 2\n"),
            "cfg.yaml:3:1: 'num_processes' is 2, fewer than 'num_machines' (4); num_processes is "
            "the total over all "
            "machines");
  EXPECT_EQ(parseError("distributed_type: MULTI_GPU\nnum_processes: 2\ngpu_ids: 0,0\n"),
            "cfg.yaml:3:1: 'gpu_ids' is '0,0': GPU 0 is listed twice");
}

TEST(ConfigFileTest, StructuralErrors) {
  EXPECT_EQ(parseError(""), "cfg.yaml: the file is empty; expected a mapping of config keys");
  EXPECT_EQ(parseError("- a\n- b\n"),
            "cfg.yaml:1:1: expected a mapping of config keys at the top level, not a list");
  EXPECT_EQ(parseError("num_processes: 2\n"),
            "cfg.yaml: 'distributed_type' must be specified (one of NO, MULTI_CPU, MULTI_GPU)");
  EXPECT_EQ(parseError("distributed_type: 'NO'\ndistributed_type: 'NO'\n"),
            "cfg.yaml:2:1: duplicate key 'distributed_type'");
  EXPECT_EQ(parseError("compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\n"),
            "cfg.yaml:1:1: compute_environment 'AMAZON_SAGEMAKER' is not supported by accel (only "
            "LOCAL_MACHINE)");
  std::string bad = parseError("distributed_type: 'NO'\nnum_processes: [1\n");
  EXPECT_EQ(bad.rfind("cfg.yaml:", 0), 0u) << bad;
  EXPECT_NE(bad.find("invalid YAML"), std::string::npos) << bad;
}

// A key accel could not read back from the JSON it writes (over YAML's 1024 characters, as
// written) is refused where it is, naming the section.
TEST(ConfigFileTest, OverlongKeysAreRejected) {
  const std::string longKey(520, '\\');  // 1040 characters once JSON doubles each backslash
  EXPECT_EQ(parseError("distributed_type: MULTI_CPU\nmpirun_config:\n  " + longKey + ": 1\n"),
            "cfg.yaml:3:3: 'mpirun_config' has a key longer than 1022 characters");
  EXPECT_TRUE(parseConfig("distributed_type: MULTI_CPU\nmpirun_config:\n  " +
                              std::string(511, '\\') + ": 1\n",  // 1022 once written
                          "cfg.yaml")
                  .ok());
}

TEST(ConfigFileTest, InvalidUtf8IsRejectedWithPosition) {
  EXPECT_EQ(parseError("distributed_type: 'NO'\nmain_process_ip: ab\xac\n"),
            "cfg.yaml:2:20: invalid UTF-8; config files must be UTF-8 text");
  EXPECT_EQ(parseError("\xff"), "cfg.yaml:1:1: invalid UTF-8; config files must be UTF-8 text");
  EXPECT_EQ(parseError(std::string("distributed_type: 'NO'\nmain_process_ip: 127\0.0.1\n", 49)),
            "cfg.yaml:2:21: control character 0x00 is not allowed in a config file");
  EXPECT_EQ(
      parseError("distributed_type: 'NO'\nmain_process_ip: \"a\\x01b\"\n"),
      "cfg.yaml:2:18: 'main_process_ip' contains a control character or text that is not UTF-8");
  // YAML's "\_" decodes to a lone 0xA0 byte, not UTF-8 (found by the fuzzer; JSON output threw).
  EXPECT_EQ(
      parseError("distributed_type: 'NO'\nmain_process_ip: \"a\\_b\"\n"),
      "cfg.yaml:2:18: 'main_process_ip' contains a control character or text that is not UTF-8");
  auto ok = parseConfig("distributed_type: 'NO'\nmain_process_ip: h\xc3\xa9te\n", "cfg.yaml");
  EXPECT_TRUE(ok.ok()) << ok.error();
}

TEST(ConfigFileTest, MissingFileNamesPath) {
  auto r = loadConfig("/nonexistent/dir/cfg.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "config file '/nonexistent/dir/cfg.yaml' does not exist");
}

TEST(ConfigFileTest, QuotesStringsYamlWouldMisread) {
  Document doc{{"a", "no"},    {"b", "yes"}, {"c", "123"},  {"d", ""},
               {"e", "plain"}, {"f", "1.5"}, {"g", "null"}, {"h", "0,1"},
               {"i", "a: b"},  {"j", "- x"}, {"k", 1.0},    {"l", "y"}};
  EXPECT_EQ(renderYaml(doc),
            "a: 'no'\nb: 'yes'\nc: '123'\nd: ''\ne: plain\nf: '1.5'\ng: 'null'\nh: 0,1\ni: 'a: "
            "b'\nj: '- x'\nk: 1.0\n"
            "l: 'y'\n");
  // And everything comes back as it went in.
  auto parsed =
      parseConfig(renderYaml(Document{{"distributed_type", "NO"}, {"gpu_ids", "0"}}), "x.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->gpu_ids, "0");
}

TEST(ConfigFileTest, SaveWritesYamlOrJsonByExtensionAndLoadsBack) {
  testing::ScratchDir dir;
  auto c = parseConfig(kAccelerateMultiCpu, "a.yaml");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(saveConfig(*c, dir.file("c.yaml")).ok());
  // accelerate 1.x's file less `enable_cpu_affinity: false`, which accelerate 0.27 rejects.
  std::string expected = kAccelerateMultiCpu;
  expected.erase(expected.find("enable_cpu_affinity: false\n"),
                 std::string("enable_cpu_affinity: false\n").size());
  EXPECT_EQ(testing::readFile(dir.file("c.yaml")), expected);
  ASSERT_TRUE(saveConfig(*c, dir.file("c.json")).ok());
  EXPECT_EQ(json::parse(testing::readFile(dir.file("c.json"))).at("num_processes"), 4);
  auto back = loadConfig(dir.file("c.json"));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, *c);
}

TEST(ConfigFileTest, FileLeavesOutDefaultsOfKeysAccelerate027Rejects) {
  auto c = parseConfig(
      "distributed_type: MULTI_CPU\nnum_processes: 2\nenable_cpu_affinity: false\nfp8_config: {}\n"
      "parallelism_config: {}\nmpirun_config:\n  mpirun_hostfile: /h\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  Document file = c->toFileDocument();
  EXPECT_EQ(file.count("enable_cpu_affinity"), 0u);
  EXPECT_EQ(file.count("fp8_config"), 0u);
  EXPECT_EQ(file.count("parallelism_config"), 0u);
  EXPECT_EQ(file.at("mpirun_config"), (json{{"mpirun_hostfile", "/h"}}));  // differs from {}: kept
  EXPECT_EQ(c->toDocument().at("enable_cpu_affinity"), false);  // `config show` still shows it
  c->enable_cpu_affinity = true;
  EXPECT_EQ(c->toFileDocument().at("enable_cpu_affinity"), true);
}

TEST(ConfigFileTest, DeepSpeedJsonFileLeavesOutMixedPrecisionNo) {
  auto c = parseConfig(
      "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: 'no'\n"
      "deepspeed_config:\n  deepspeed_config_file: /ds.json\n  zero3_init_flag: false\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->toFileDocument().count("mixed_precision"), 0u);
  c->mixed_precision = "bf16";  // a choice the user made stays, even if accelerate then objects
  EXPECT_EQ(c->toFileDocument().at("mixed_precision"), "bf16");
  c->mixed_precision = "no";
  c->extras["deepspeed_config"] =
      json{{"zero_stage", 2}};  // no JSON file: precision is ours to say
  EXPECT_EQ(c->toFileDocument().at("mixed_precision"), "no");
}

TEST(ConfigFileTest, UpdateDropsIpexConfigWithAReason) {
  auto c = parseConfig(kAccelerateMpi, "mpi.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  auto dropped = dropObsoleteKeys(*c);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(
      dropped[0],
      "removed 'ipex_config': accelerate 1.x rejects it (its IPEX options are gone since 1.0)");
  EXPECT_EQ(c->toFileDocument().count("ipex_config"), 0u);
  EXPECT_EQ(c->extras.count("mpirun_config"), 1u);  // valid keys accel does not interpret survive
  EXPECT_TRUE(dropObsoleteKeys(*c).empty());
}

TEST(ConfigFileTest, FailedWriteLeavesOldFileAndNoTempFiles) {
  testing::ScratchDir dir;
  const std::string target = dir.file("cfg.yaml");
  testing::writeFile(target, "old contents\n");
  // Renaming over a non-empty directory fails after the temp file was written.
  const std::string blocked = dir.file("blocked.yaml");
  ASSERT_EQ(::mkdir(blocked.c_str(), 0755), 0);
  testing::writeFile(blocked + "/keep", "x");
  auto r = writeFileAtomically(blocked, "new contents\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot replace '" + blocked + "'"), std::string::npos) << r.error();

  ASSERT_TRUE(writeFileAtomically(target, "new contents\n").ok());
  EXPECT_EQ(testing::readFile(target), "new contents\n");

  int entries = 0;
  DIR* d = ::opendir(dir.path().c_str());
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << "left behind: " << name;
    ++entries;
  }
  ::closedir(d);
  EXPECT_EQ(entries, 4);  // . .. cfg.yaml blocked.yaml
}

TEST(ConfigFileTest, WriteIntoMissingDirectoryFailsWithPath) {
  auto r = writeFileAtomically("/nonexistent-dir/cfg.yaml", "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "cannot write '/nonexistent-dir/cfg.yaml': No such file or directory");
}

}  // namespace
}  // namespace accel::config
