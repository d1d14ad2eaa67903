#include "probes/scheduler_env.h"

#include <gtest/gtest.h>

namespace accel::probes {
namespace {

using Hosts = std::vector<std::string>;

TEST(HostlistTest, ExpandsRangesListsAndPadding) {
  auto hosts = expandHostlist("gpu-a[01-04,07],cpu[1-2]");
  ASSERT_TRUE(hosts) << hosts.error();
  EXPECT_EQ(*hosts, (Hosts{"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "gpu-a07", "cpu1", "cpu2"}));
  EXPECT_EQ(*expandHostlist("n[08-11]"), (Hosts{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(*expandHostlist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(*expandHostlist("node7"), (Hosts{"node7"}));
  EXPECT_EQ(*expandHostlist("a,b.example.com"), (Hosts{"a", "b.example.com"}));
}

TEST(HostlistTest, SeveralBracketGroupsAndSuffixesMultiply) {
  EXPECT_EQ(*expandHostlist("r[1-2]n[1-2]"), (Hosts{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(*expandHostlist("n[1,3]-ib"), (Hosts{"n1-ib", "n3-ib"}));
  EXPECT_EQ(*expandHostlist("x[5]"), (Hosts{"x5"}));
}

TEST(HostlistTest, MalformedListsAreErrorsNamingThePart) {
  struct Case {
    const char* text;
    const char* mentions;
  } cases[] = {
      {"", "empty"},
      {"n[1-3", "without matching ']'"},
      {"n1-3]", "']' without '['"},
      {"n[3-1]", "'3-1' goes backwards"},
      {"n[a-b]", "'a-b'"},
      {"n[1-2],,m", "empty name"},
      {"n[]", "is not a number"},
      {"n[1-9999999]", "more than"},
      {"n[1-999][1-999][1-999]", "more than"},
  };
  for (const auto& c : cases) {
    auto hosts = expandHostlist(c.text);
    ASSERT_FALSE(hosts) << c.text;
    EXPECT_NE(hosts.error().find(c.mentions), std::string::npos) << c.text << ": " << hosts.error();
  }
}

TEST(TasksPerNodeTest, ExpandsRepeats) {
  EXPECT_EQ(*expandTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*expandTasksPerNode("4"), (std::vector<int>{4}));
  EXPECT_FALSE(expandTasksPerNode("2(x)"));
  EXPECT_FALSE(expandTasksPerNode("x"));
}

Environment slurmStep() {
  return {"SLURM_JOB_ID=4242",
          "SLURM_STEP_ID=0",
          "SLURM_JOB_NODELIST=gpu-a[01-04,07],cpu[1-2]",
          "SLURM_STEP_NODELIST=gpu-a[01-02]",
          "SLURM_NNODES=2",
          "SLURM_NODEID=1",
          "SLURM_NTASKS=4",
          "SLURM_PROCID=3",
          "SLURM_LOCALID=1",
          "SLURM_STEP_TASKS_PER_NODE=2(x2)",
          "SLURM_GPUS_ON_NODE=2",
          "SLURM_CPUS_ON_NODE=16",
          "PATH=/usr/bin"};
}

TEST(DetectSchedulerTest, NoSchedulerVariablesMeansStatic) {
  auto s = detectScheduler({"PATH=/usr/bin", "HOME=/root"});
  ASSERT_TRUE(s) << s.error();
  EXPECT_FALSE(s->has_value());
}

TEST(DetectSchedulerTest, SlurmStepGivesNodesAndTask) {
  auto s = detectScheduler(slurmStep());
  ASSERT_TRUE(s) << s.error();
  ASSERT_TRUE(s->has_value());
  const SchedulerInfo& info = **s;
  EXPECT_EQ(info.name, "SLURM");
  EXPECT_TRUE(info.in_step);
  EXPECT_EQ(info.hosts,
            (Hosts{"gpu-a01", "gpu-a02"}));  // the step's nodes, not the whole allocation
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.job_id, "4242");
  EXPECT_EQ(info.gpus_on_node, 2);
  EXPECT_EQ(info.cpus_on_node, 16);
  EXPECT_EQ(info.num_tasks, 4);
  EXPECT_EQ(info.task_rank, 3);
  EXPECT_EQ(info.local_task_rank, 1);
  EXPECT_EQ(info.local_num_tasks, 2);
}

TEST(DetectSchedulerTest, SlurmBatchScriptUsesTheJobNodelist) {
  auto s = detectScheduler(
      {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_NNODES=2", "SLURM_NODEID=0"});
  ASSERT_TRUE(s) << s.error();
  EXPECT_FALSE((*s)->in_step);
  EXPECT_EQ((*s)->hosts, (Hosts{"n1", "n2"}));
}

TEST(DetectSchedulerTest, SlurmInconsistenciesNameTheVariable) {
  auto env = slurmStep();
  env.push_back("SLURM_STEP_NUM_NODES=3");
  auto s = detectScheduler(env);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("SLURM_STEP_NODELIST"), std::string::npos) << s.error();

  s = detectScheduler({"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n[1-2", "SLURM_NNODES=2"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("SLURM_JOB_NODELIST: hostlist 'n[1-2'"), std::string::npos) << s.error();

  s = detectScheduler(
      {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n1", "SLURM_NNODES=1", "SLURM_NODEID=x"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("SLURM_NODEID='x'"), std::string::npos) << s.error();
}

TEST(DetectSchedulerTest, OpenMpiWinsOverTheSurroundingAllocation) {
  auto env = slurmStep();
  for (const char* kv :
       {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_MCA_ess_base_jobid=1234"}) {
    env.push_back(kv);
  }
  auto s = detectScheduler(env);
  ASSERT_TRUE(s) << s.error();
  const SchedulerInfo& info = **s;
  EXPECT_EQ(info.name, "Open MPI");
  EXPECT_EQ(info.task_rank, 5);
  EXPECT_EQ(info.num_tasks, 8);
  EXPECT_EQ(info.local_task_rank, 1);
  EXPECT_EQ(info.local_num_tasks, 4);
  EXPECT_EQ(info.num_nodes, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.job_id, "1234");
}

TEST(DetectSchedulerTest, PmiNeedsALocalRank) {
  auto s = detectScheduler({"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2"});
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)->name, "PMI");
  EXPECT_EQ((*s)->local_task_rank, 1);
  s = detectScheduler({"PMI_RANK=1", "PMI_SIZE=2"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("MPI_LOCALRANKID"), std::string::npos) << s.error();
  s = detectScheduler({"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2",
                       "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("rank 2 of 2"), std::string::npos) << s.error();
}

}  // namespace
}  // namespace accel::probes
