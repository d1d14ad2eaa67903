#include "launcher/plan/cpu_affinity.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "launcher/plan/worker_env.h"
#include "launcher/supervise/subprocess_posix.h"
#include "tests/config/test_util.h"

namespace accel::launcher {
namespace {

using Sets = std::vector<std::vector<int>>;

std::vector<int> range(int lo, int hi) {  // [lo, hi]
  std::vector<int> out;
  for (int i = lo; i <= hi; ++i) out.push_back(i);
  return out;
}

// No SMT: every CPU its own core.
CpuTopology flat(std::vector<int> allowed, Sets nodes) {
  CpuTopology t;
  t.allowed = std::move(allowed);
  t.nodes = std::move(nodes);
  for (int cpu : t.allowed) t.cores.push_back({cpu});
  return t;
}

// 2 NUMA nodes, 4 physical cores with 2 threads each, numbered as Linux usually does: cores on
// CPUs 0-3, their siblings on 4-7; node 0 holds cores 0,1 (CPUs 0,1,4,5), node 1 cores 2,3.
CpuTopology twoNodesSmt() {
  CpuTopology t;
  t.allowed = range(0, 7);
  t.nodes = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  t.cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  return t;
}

TEST(CpuAffinityTest, OneNodeTwoCoresGivesEachRankItsOwnCore) {
  const auto t = flat({0, 1}, {{0, 1}});
  auto a = planCpuAffinity(t, 2);
  EXPECT_EQ(a.rank_cpus, (Sets{{0}, {1}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{1, 1}));
  EXPECT_FALSE(a.shared);
  a = planCpuAffinity(t, 1);
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 1}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{2}));
}

TEST(CpuAffinityTest, TwoNodesWithSmtKeepSiblingsTogetherAndRanksOnTheirNode) {
  const auto t = twoNodesSmt();
  // One rank per node: the whole node, 2 physical cores (OMP threads count cores, not threads).
  auto a = planCpuAffinity(t, 2);
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{2, 2}));
  // One rank per core: both hyperthreads of one core each, ranks 0,1 on node 0.
  a = planCpuAffinity(t, 4);
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{1, 1, 1, 1}));
  // More ranks than cores: single hyperthreads, in core order, still within each node.
  a = planCpuAffinity(t, 8);
  EXPECT_EQ(a.rank_cpus, (Sets{{0}, {4}, {1}, {5}, {2}, {6}, {3}, {7}}));
  EXPECT_FALSE(a.shared);
  // Fewer ranks than nodes: a rank gets whole nodes.
  a = planCpuAffinity(t, 1);
  EXPECT_EQ(a.rank_cpus, (Sets{range(0, 7)}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{4}));
}

TEST(CpuAffinityTest, NothingToGiveOutPinsNothing) {
  EXPECT_TRUE(planCpuAffinity(flat({}, {{0, 1}}), 2).rank_cpus.empty());
  EXPECT_TRUE(planCpuAffinity(flat({0, 1}, {{0, 1}}), 0).rank_cpus.empty());
  EXPECT_TRUE(planCpuAffinity(flat({}, {}), 2, std::vector<int>{0, 0}).rank_cpus.empty());
}

TEST(CpuAffinityTest, ThreeRanksOnFourCoresSplitContiguouslyLargerFirst) {
  const auto a = planCpuAffinity(flat(range(0, 3), {range(0, 3)}), 3);
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 1}, {2}, {3}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{2, 1, 1}));
}

TEST(CpuAffinityTest, MoreRanksThanCpusShareRoundRobin) {
  const auto a = planCpuAffinity(flat({0, 1}, {{0, 1}}), 5);
  EXPECT_TRUE(a.shared);
  EXPECT_EQ(a.rank_cpus, (Sets{{0}, {1}, {0}, {1}, {0}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>(5, 1)));
}

TEST(CpuAffinityTest, CpusetExcludingCoresIsRespected) {
  // The agent may use CPUs 1,2,3 and 6 of two 4-CPU nodes: node 0 has 3 of them, node 1 one.
  const auto t = flat({1, 2, 3, 6}, {range(0, 3), range(4, 7)});
  auto a = planCpuAffinity(t, 2);
  EXPECT_EQ(a.rank_cpus, (Sets{{1, 2, 3}, {6}}));
  // 3 ranks: in proportion to the allowed CPUs (3:1 → 2.25 and 0.75), node 0 gets 2 and node 1 one.
  a = planCpuAffinity(t, 3);
  EXPECT_EQ(a.rank_cpus, (Sets{{1, 2}, {3}, {6}}));
  // 4 ranks, 4 allowed CPUs: one each, nothing outside the cpuset.
  a = planCpuAffinity(t, 4);
  EXPECT_EQ(a.rank_cpus, (Sets{{1}, {2}, {3}, {6}}));
  EXPECT_FALSE(a.shared);
  // A half-allowed SMT core counts as one core with one thread.
  CpuTopology smt = twoNodesSmt();
  smt.allowed = {0, 1, 5};
  a = planCpuAffinity(smt, 2);
  EXPECT_EQ(a.rank_cpus, (Sets{{0}, {1, 5}}));
}

TEST(CpuAffinityTest, UnevenNodesGetRanksInProportion) {
  // 6 CPUs on node 0, 2 on node 1: 4 ranks → 3 and 1.
  const auto a = planCpuAffinity(flat(range(0, 7), {range(0, 5), {6, 7}}), 4);
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(CpuAffinityTest, CpusOutsideEveryNodeFormOneOfTheirOwn) {
  const auto a = planCpuAffinity(flat(range(0, 3), {}), 2);
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 1}, {2, 3}}));
}

TEST(CpuAffinityTest, GpuRanksShareTheirGpusNode) {
  const auto t = twoNodesSmt();
  // GPUs 0,1 on node 0, GPUs 2,3 on node 1: accelerate gives each rank its GPU's whole node.
  auto a = planCpuAffinity(t, 4, std::vector<int>{0, 0, 1, 1});
  EXPECT_EQ(a.rank_cpus, (Sets{{0, 1, 4, 5}, {0, 1, 4, 5}, {2, 3, 6, 7}, {2, 3, 6, 7}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{1, 1, 1, 1}));  // 2 cores shared by 2 ranks
  // Unknown node (-1), a node with no CPUs, a missing entry: every allowed CPU.
  a = planCpuAffinity(t, 3, std::vector<int>{-1, 7});
  EXPECT_EQ(a.rank_cpus, (Sets{range(0, 7), range(0, 7), range(0, 7)}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{1, 1, 1}));  // 4 cores, 3 ranks
  // The cpuset still wins: node 1 allowed only on CPU 6.
  CpuTopology limited = t;
  limited.allowed = {0, 1, 6};
  a = planCpuAffinity(limited, 2, std::vector<int>{1, 0});
  EXPECT_EQ(a.rank_cpus, (Sets{{6}, {0, 1}}));
  EXPECT_EQ(a.rank_threads, (std::vector<int>{1, 2}));
}

TEST(CpuAffinityTest, CpuListsParseAndFormat) {
  auto cpus = parseCpuList("0-3,8,10-11\n");
  ASSERT_TRUE(cpus) << cpus.error();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(formatCpuList(*cpus), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({5}), "5");
  EXPECT_EQ(formatCpuList({}), "");
  auto empty = parseCpuList("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());  // a memory-only NUMA node's cpulist
  for (const char* bad : {"3-1", "a", "1,,2", "1-", "-2"}) {
    auto r = parseCpuList(bad);
    EXPECT_FALSE(r) << bad;
  }
  EXPECT_NE(parseCpuList("0,x").error().find("'x'"), std::string::npos);
}

// A fake sysfs tree: the reader finds nodes by number (with a gap) and sibling groups.
TEST(CpuAffinityTest, ReadsTopologyFromSysfs) {
  char dir[] = "/tmp/accel-cpu-topo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string root = dir;
  auto write = [&](const std::string& rel, const std::string& text) {
    for (size_t at = 1; (at = rel.find('/', at)) != std::string::npos; ++at) {
      ::mkdir((root + rel.substr(0, at)).c_str(), 0755);
    }
    std::ofstream(root + rel) << text;
  };
  write("/devices/system/node/node0/cpulist", "0-1,4-5\n");
  write("/devices/system/node/node2/cpulist", "2-3,6-7\n");
  write("/devices/system/node/possible", "0-2\n");
  for (int cpu = 0; cpu < 8; ++cpu) {
    write("/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list",
          std::to_string(cpu % 4) + "," + std::to_string(cpu % 4 + 4) + "\n");
  }
  const CpuTopology t = readCpuTopology(range(0, 7), root);
  EXPECT_EQ(t.nodes, (Sets{{0, 1, 4, 5}, {}, {2, 3, 6, 7}}));
  EXPECT_EQ(t.cores, (Sets{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(planCpuAffinity(t, 2, std::vector<int>{2, 0}).rank_cpus,
            (Sets{{2, 3, 6, 7}, {0, 1, 4, 5}}));
  // Nothing there: one node, no SMT.
  const CpuTopology none = readCpuTopology({0, 1}, root + "/absent");
  EXPECT_TRUE(none.nodes.empty());
  EXPECT_TRUE(none.cores.empty());
  EXPECT_EQ(planCpuAffinity(none, 2).rank_cpus, (Sets{{0}, {1}}));
  std::string cmd = "rm -rf '" + root + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(CpuAffinityTest, AllowedCpusAreThisProcesssAffinity) {
  auto cpus = allowedCpus();
  ASSERT_TRUE(cpus) << cpus.error();
  ASSERT_FALSE(cpus->empty());
  EXPECT_TRUE(std::is_sorted(cpus->begin(), cpus->end()));
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
    auto fromProc = parseCpuList(line.substr(line.find(':') + 1));
    ASSERT_TRUE(fromProc) << fromProc.error();
    EXPECT_EQ(*cpus, *fromProc);
    return;
  }
  FAIL() << "no Cpus_allowed_list in /proc/self/status";
}

// The chain from flag or key to each worker's environment: makeLaunchPlan decides who chooses
// OMP_NUM_THREADS, assignCpuAffinity the sets, launcherVariables what each rank gets.
class CpuAffinityPlanTest : public ::testing::Test {
 protected:
  LaunchPlan plan(LaunchOptions o, probes::Environment env = {"PATH=/usr/bin:/bin"}, int gpus = 0) {
    o.command = {"/bin/true"};
    auto p = makeLaunchPlan(o, paths_, env, [gpus] { return gpus; });
    EXPECT_TRUE(p.ok()) << p.error();
    return p.ok() ? std::move(*p) : LaunchPlan{};
  }
  static std::string var(const LaunchPlan& p, int localRank, const std::string& key) {
    for (const auto& kv :
         launcherVariables(p, staticPlacement(p, 1234), WorkerSlot{localRank, 0, ""})) {
      if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    }
    return "<unset>";
  }
  testing::ScratchDir dir_;
  config::PathEnv paths_{dir_.path(), std::nullopt, "/root"};
};

TEST_F(CpuAffinityPlanTest, FlagPinsEachRankAndSetsItsThreads) {
  LaunchOptions o;
  o.config.cpu = true;
  o.config.num_processes = 2;
  o.config.enable_cpu_affinity = true;
  LaunchPlan p = plan(o);
  EXPECT_EQ(p.config.sources.at("enable_cpu_affinity"), config::Source::Flag);
  EXPECT_TRUE(p.omp_from_affinity);
  EXPECT_FALSE(p.omp_notice);  // no "each gets OMP_NUM_THREADS=1": the cores decide
  assignCpuAffinity(p, twoNodesSmt());
  EXPECT_EQ(p.rank_cpus, (Sets{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(var(p, 0, "OMP_NUM_THREADS"), "2");
  EXPECT_EQ(var(p, 1, "OMP_NUM_THREADS"), "2");
  EXPECT_EQ(var(p, 1, "ACCELERATE_CPU_AFFINITY"), "1");
  ASSERT_EQ(p.notices.size(), 1u);
  EXPECT_EQ(p.notices[0],
            "CPU affinity (CPUs 0-7 of this agent, 2 NUMA nodes): local rank 0 on CPUs 0-1,4-5 "
            "(OMP_NUM_THREADS=2); "
            "local rank 1 on CPUs 2-3,6-7 (OMP_NUM_THREADS=2)");
}

TEST_F(CpuAffinityPlanTest, TheUsersThreadCountIsKept) {
  LaunchOptions o;
  o.config.num_processes = 2;
  o.config.enable_cpu_affinity = true;
  o.num_cpu_threads_per_process = 3;  // the flag wins
  LaunchPlan p = plan(o);
  assignCpuAffinity(p, twoNodesSmt());
  EXPECT_EQ(p.rank_cpus.size(), 2u);
  EXPECT_EQ(var(p, 0, "OMP_NUM_THREADS"), "3");
  EXPECT_EQ(var(p, 1, "OMP_NUM_THREADS"), "3");
  o.num_cpu_threads_per_process.reset();  // the parent's OMP_NUM_THREADS is kept
  p = plan(o, {"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=7"});
  assignCpuAffinity(p, twoNodesSmt());
  EXPECT_EQ(p.rank_cpus.size(), 2u);
  EXPECT_EQ(var(p, 1, "OMP_NUM_THREADS"), "7");  // passed on as accelerate does
}

TEST_F(CpuAffinityPlanTest, ConfigKeyTurnsItOnAndOffLeavesEverythingAlone) {
  testing::writeFile(dir_.file("c.yaml"),
                     "distributed_type: MULTI_CPU\nnum_processes: 3\nuse_cpu: true\n"
                     "enable_cpu_affinity: true\n");
  LaunchOptions o;
  o.config.config_file = dir_.file("c.yaml");
  LaunchPlan p = plan(o);
  EXPECT_EQ(p.config.sources.at("enable_cpu_affinity"), config::Source::File);
  assignCpuAffinity(p, flat({0, 1}, {{0, 1}}));
  EXPECT_EQ(p.rank_cpus, (Sets{{0}, {1}, {0}}));
  ASSERT_EQ(p.notices.size(), 2u);
  EXPECT_EQ(p.notices[1], "enable_cpu_affinity: 3 local ranks but only 2 CPUs; ranks share CPUs");
  // Off: no sets, no notices, the old OMP_NUM_THREADS rule.
  o.config.config_file.reset();
  o.config.num_processes = 3;
  p = plan(o);
  assignCpuAffinity(p, flat({0, 1}, {{0, 1}}));
  EXPECT_TRUE(p.rank_cpus.empty());
  EXPECT_TRUE(p.notices.empty());
  EXPECT_EQ(var(p, 2, "OMP_NUM_THREADS"), "1");
  EXPECT_EQ(var(p, 2, "ACCELERATE_CPU_AFFINITY"), "<unset>");
}

TEST_F(CpuAffinityPlanTest, GpuJobsAreSpreadAsCpuJobsWithANotice) {
  LaunchOptions o;
  o.config.multi_gpu = true;
  o.config.num_processes = 2;
  o.config.enable_cpu_affinity = true;
  LaunchPlan p = plan(o, {"PATH=/usr/bin:/bin"}, 2);
  assignCpuAffinity(p, twoNodesSmt());
  EXPECT_EQ(p.rank_cpus, (Sets{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  ASSERT_FALSE(p.notices.empty());
  EXPECT_NE(p.notices[0].find(
                "the GPUs' NUMA nodes are not known (the CUDA driver gives no PCI bus ids)"),
            std::string::npos)
      << p.notices[0];
  o.config.multi_gpu = false;  // FSDP (like DeepSpeed and Megatron-LM) is a GPU job too
  o.config.distributed_type = "FSDP";
  p = plan(o, {"PATH=/usr/bin:/bin"}, 2);
  assignCpuAffinity(p, twoNodesSmt());
  ASSERT_FALSE(p.notices.empty());
  EXPECT_NE(p.notices[0].find(
                "the GPUs' NUMA nodes are not known (the CUDA driver gives no PCI bus ids)"),
            std::string::npos)
      << p.notices[0];
}

// With the GPUs' nodes known (here: GPU 3 on node 1, GPU 1 on node 0), each rank follows its GPU.
TEST_F(CpuAffinityPlanTest, GpuJobFollowsItsGpusNumaNodes) {
  LaunchOptions o;
  o.config.multi_gpu = true;
  o.config.num_processes = 2;
  o.config.enable_cpu_affinity = true;
  o.config.gpu_ids = "3,1";
  LaunchPlan p = plan(o, {"PATH=/usr/bin:/bin"}, 4);
  EXPECT_EQ(rankGpuDevices(p), (std::vector<int>{3, 1}));
  assignCpuAffinity(p, twoNodesSmt(), std::vector<int>{1, 0});
  EXPECT_EQ(p.rank_cpus, (Sets{{2, 3, 6, 7}, {0, 1, 4, 5}}));
  EXPECT_EQ(var(p, 0, "OMP_NUM_THREADS"), "2");  // node 1's two cores, one rank there
  ASSERT_EQ(p.notices.size(), 1u) << p.notices[0];
  EXPECT_EQ(
      p.notices[0],
      "CPU affinity (CPUs 0-7 of this agent, 2 NUMA nodes): local rank 0 on CPUs 2-3,6-7 (GPU 3 on "
      "NUMA node 1, "
      "OMP_NUM_THREADS=2); local rank 1 on CPUs 0-1,4-5 (GPU 1 on NUMA node 0, OMP_NUM_THREADS=2)");
  // Both GPUs on node 0: the ranks share its CPUs, one core's worth of threads each.
  p = plan(o, {"PATH=/usr/bin:/bin"}, 4);
  assignCpuAffinity(p, twoNodesSmt(), std::vector<int>{0, 0});
  EXPECT_EQ(p.rank_cpus, (Sets{{0, 1, 4, 5}, {0, 1, 4, 5}}));
  EXPECT_EQ(var(p, 1, "OMP_NUM_THREADS"), "1");
  // sysfs knows no node (-1 everywhere, as on a machine without NUMA): spread as a CPU job.
  p = plan(o, {"PATH=/usr/bin:/bin"}, 4);
  assignCpuAffinity(p, twoNodesSmt(), std::vector<int>{-1, -1});
  EXPECT_EQ(p.rank_cpus, (Sets{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  ASSERT_FALSE(p.notices.empty());
  EXPECT_NE(p.notices[0].find("not known (sysfs gives none for their PCI devices)"),
            std::string::npos)
      << p.notices[0];
  // A CPU job ignores GPU nodes.
  o.config.multi_gpu = false;
  o.config.cpu = true;
  o.config.gpu_ids.reset();
  p = plan(o);
  assignCpuAffinity(p, twoNodesSmt(), std::vector<int>{0, 0});
  EXPECT_EQ(p.rank_cpus, (Sets{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(rankGpuDevices(p), (std::vector<int>{0, 1}));
}

// A fake sysfs PCI tree: bus ids as CUDA ("0000:3B:00.0") and NVML ("00000000:...") spell them.
TEST(CpuAffinityTest, GpuNumaNodesComeFromTheirPciDevices) {
  testing::ScratchDir dir;
  const std::string root = dir.path();
  auto write = [&](const std::string& bdf, const std::string& text) {
    const std::string d = root + "/bus/pci/devices/" + bdf;
    ASSERT_EQ(std::system(("mkdir -p '" + d + "'").c_str()), 0);
    std::ofstream(d + "/numa_node") << text;
  };
  write("0000:3b:00.0", "1\n");
  write("0000:5e:00.0", "0\n");
  write("0000:86:00.0", "-1\n");
  const std::vector<std::string> ids = {"0000:3B:00.0", "00000000:5E:00.0", "0000:86:00.0", "",
                                        "0000:AF:00.0"};
  EXPECT_EQ(gpuNumaNodes(ids, {0, 1, 2, 3, 4, 5, -1}, root),
            (std::vector<int>{1, 0, -1, -1, -1, -1, -1}));
  EXPECT_EQ(gpuNumaNodes(ids, {1, 0}, root), (std::vector<int>{0, 1}));
  EXPECT_EQ(gpuNumaNodes({}, {0}, root), (std::vector<int>{-1}));
}

// The child pins itself between fork and exec: a worker reads its own CPUs back.
TEST(CpuAffinitySpawnTest, WorkerStartsPinnedAndAPinFailureIsNamed) {
  testing::ScratchDir dir;
  const std::string out = dir.file("cpus");
  auto mine = allowedCpus();
  ASSERT_TRUE(mine && !mine->empty());
  const int cpu = mine->back();
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list: /proc/self/status > '" + out + "'"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.cpus = {cpu};
  auto pid = spawnWorker(spec);
  ASSERT_TRUE(pid) << pid.error();
  reap(*pid);
  EXPECT_EQ(testing::readFile(out), "Cpus_allowed_list:\t" + std::to_string(cpu) + "\n");
  // Only CPUs that do not exist: the kernel refuses, and nothing runs.
  spec.cpus = {4000, 4001};
  pid = spawnWorker(spec);
  ASSERT_FALSE(pid);
  EXPECT_EQ(pid.error(), "cannot pin '/bin/sh' to CPUs 4000,4001: Invalid argument");
}

}  // namespace
}  // namespace accel::launcher
