// The environment Kubeflow gives a pod (tests/fixtures/kubernetes, read from the operators'
// source), under an accel named torchrun (`accel run SCRIPT`, no flags): the job torchrun would
// make of it, and each worker's own RANK/WORLD_SIZE whatever the pod's say.

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "config/paths.h"
#include "launcher/cli/launch_flags.h"
#include "launcher/cli/options_from_flags.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/plan/worker_env.h"
#include "tests/config/test_util.h"

namespace accel::launcher {
namespace {

// KEY=VALUE lines of a fixture, after the pod's usual PATH.
probes::Environment podEnvironment(const std::string& name) {
  probes::Environment env{"PATH=/usr/bin:/bin"};
  std::ifstream in(std::string(ACCEL_K8S_FIXTURES) + "/" + name);
  EXPECT_TRUE(in) << name;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') env.push_back(line);
  }
  return env;
}

class KubernetesEnvTest : public ::testing::Test {
 protected:
  Expected<LaunchPlan> plan(const probes::Environment& env) {
    testing::writeFile(dir_.file("train.py"), "print('hi')\n");
    auto parsed = parseLaunchFlags({dir_.file("train.py")}, LaunchMode::Torchrun, env);
    if (!parsed) return std::move(parsed).takeError();
    auto o = launchOptionsFrom(std::move(*parsed));
    if (!o) return std::move(o).takeError();
    return makeLaunchPlan(*o, paths_, env, [] { return 0; });
  }
  testing::ScratchDir dir_;
  config::PathEnv paths_{dir_.path(), std::nullopt, "/root"};
};

TEST_F(KubernetesEnvTest, PyTorchJobV1WorkerIsMachine2Of3WithProcessRanks) {
  const auto env = podEnvironment("pytorchjob_v1_worker1.env");
  auto p = plan(env);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->num_machines, 3);
  EXPECT_FALSE(p->elastic());
  EXPECT_EQ(p->machine_rank, 2);
  EXPECT_EQ(p->local_world_size, 2);
  EXPECT_EQ(p->world_size, 6);
  EXPECT_EQ(p->master_addr, "train-master-0");
  EXPECT_EQ(p->master_port, 23456);
  // The pod's RANK=2 counts pods; its second worker is rank 5 of 6.
  const auto vars = launcherVariableMap(*p, staticPlacement(*p, 23456), WorkerSlot{1, 0, ""});
  EXPECT_EQ(vars.at("RANK"), "5");
  EXPECT_EQ(vars.at("WORLD_SIZE"), "6");
  EXPECT_EQ(vars.at("GROUP_RANK"), "2");
  EXPECT_EQ(vars.at("LOCAL_RANK"), "1");
  EXPECT_EQ(vars.at("MASTER_ADDR"), "train-master-0");
}

TEST_F(KubernetesEnvTest, PyTorchJobV1ElasticPolicyIsAnElasticGroupRankedByArrival) {
  auto env = podEnvironment("pytorchjob_v1_elastic_worker1.env");
  auto p = plan(env);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->elastic());
  EXPECT_EQ(p->min_machines, 2);
  EXPECT_EQ(p->num_machines, 3);
  EXPECT_TRUE(p->rank_by_arrival);
  EXPECT_EQ(p->machine_rank, std::nullopt);
  EXPECT_EQ(p->max_restarts, 3);
  EXPECT_EQ(p->local_world_size, 2);
  EXPECT_EQ(p->master_addr, "train-worker-0");
  EXPECT_EQ(p->master_port, 23456);
  // PET_STANDALONE="" (what a spec without `standalone` may leave) changes nothing.
  env.push_back("PET_STANDALONE=");
  auto same = plan(env);
  ASSERT_TRUE(same.ok()) << same.error();
  EXPECT_TRUE(same->elastic());
  EXPECT_EQ(same->master_addr, "train-worker-0");
}

// elasticPolicy with rdzvBackend etcd (rdzvHost etcd-service, rdzvPort 2379): rounds on that etcd,
// under torchrun's default run id ("none": the operator sets PET_RDZV_ID only from rdzvId).
TEST_F(KubernetesEnvTest, PyTorchJobV1ElasticPolicyOnEtcdMeetsOnIt) {
  auto p = plan(podEnvironment("pytorchjob_v1_elastic_etcd_worker1.env"));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->elastic());
  EXPECT_EQ(p->min_machines, 2);
  EXPECT_EQ(p->num_machines, 3);
  EXPECT_EQ(p->max_restarts, 3);
  EXPECT_EQ(p->local_world_size, 2);
  EXPECT_EQ(p->etcd_endpoints, "etcd-service:2379");
  EXPECT_EQ(p->rendezvous_id, "none");
}

TEST_F(KubernetesEnvTest, TrainerV2NodeIsMachine1Of2) {
  auto p = plan(podEnvironment("trainjob_v2_node1.env"));
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->num_machines, 2);
  EXPECT_EQ(p->machine_rank, 1);
  EXPECT_EQ(p->world_size, 4);
  EXPECT_EQ(p->master_addr, "train-node-0-0.train");
  EXPECT_EQ(p->master_port, 29500);
  const auto vars = launcherVariableMap(*p, staticPlacement(*p, 29500), WorkerSlot{0, 0, ""});
  EXPECT_EQ(vars.at("RANK"), "2");
  EXPECT_EQ(vars.at("WORLD_SIZE"), "4");
}

}  // namespace
}  // namespace accel::launcher
