#include "launcher/plan/worker_env.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace accel::launcher {
namespace {

LaunchPlan twoByFour() {
  LaunchPlan plan;
  plan.world_size = 8;
  plan.local_world_size = 4;
  plan.num_machines = 2;
  plan.machine_rank = 1;
  plan.master_addr = "10.0.0.1";
  plan.max_restarts = 3;
  plan.run_id = "job42";
  plan.omp_num_threads = 2;
  plan.common_env = {{"ACCELERATE_MIXED_PRECISION", "bf16"}, {"OMP_NUM_THREADS", "ignored"}};
  return plan;
}

// Machine 1 of 2 as its rendezvous placed it, the store at 10.0.0.1:29501.
Placement secondMachine() {
  Placement p;
  p.machine_rank = 1;
  p.num_machines = 2;
  p.rank_offset = 4;
  p.world_size = 8;
  p.master_addr = "10.0.0.1";
  p.master_port = 29501;
  return p;
}

bool has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

TEST(WorkerEnvTest, TorchrunContractForASecondMachine) {
  auto plan = twoByFour();
  auto vars = launcherVariables(plan, secondMachine(),
                                WorkerSlot{2, 1, "/run/attempt_1/rank_6/error.json"});
  for (const char* kv : {"RANK=6", "LOCAL_RANK=2", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4",
                         "GROUP_RANK=1", "GROUP_WORLD_SIZE=2", "ROLE_RANK=6", "ROLE_WORLD_SIZE=8",
                         "ROLE_NAME=default", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29501",
                         "TORCHELASTIC_RESTART_COUNT=1", "TORCHELASTIC_MAX_RESTARTS=3",
                         "TORCHELASTIC_RUN_ID=job42", "TORCHELASTIC_USE_AGENT_STORE=True",
                         "TORCHELASTIC_ERROR_FILE=/run/attempt_1/rank_6/error.json",
                         "ACCELERATE_MIXED_PRECISION=bf16", "OMP_NUM_THREADS=2"}) {
    EXPECT_TRUE(has(vars, kv)) << kv;
  }
  EXPECT_TRUE(std::is_sorted(vars.begin(), vars.end()));
}

TEST(WorkerEnvTest, ParentEnvironmentIsInheritedButAccelWins) {
  auto plan = twoByFour();
  auto env = workerEnvironment(plan, secondMachine(), WorkerSlot{0, 0, ""},
                               {"PATH=/usr/bin", "RANK=99", "HOME=/root", "MALFORMED"});
  EXPECT_TRUE(has(env, "PATH=/usr/bin"));
  EXPECT_TRUE(has(env, "HOME=/root"));
  EXPECT_TRUE(has(env, "RANK=4"));
  EXPECT_FALSE(has(env, "RANK=99"));
  EXPECT_FALSE(has(env, "MALFORMED"));
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& e) { return e.rfind("RANK=", 0) == 0; }),
            1);
  EXPECT_FALSE(std::any_of(env.begin(), env.end(), [](const std::string& e) {
    return e.rfind("TORCHELASTIC_ERROR_FILE=", 0) == 0;
  }));
}

TEST(WorkerEnvTest, OmpThreadsLeftAloneWhenPlanDoesNotSetIt) {
  auto plan = twoByFour();
  plan.omp_num_threads.reset();
  plan.common_env.clear();
  auto env = workerEnvironment(plan, secondMachine(), WorkerSlot{}, {"OMP_NUM_THREADS=7"});
  EXPECT_TRUE(has(env, "OMP_NUM_THREADS=7"));
}

// The one GLOO_SOCKET_IFNAME rule: the placement's interface, unless the user chose one.
TEST(WorkerEnvTest, SocketInterfaceUnlessTheUserChoseOne) {
  EXPECT_EQ(chooseSocketInterface({"PATH=/usr/bin"}, "eth1"), "eth1");
  EXPECT_EQ(chooseSocketInterface({"GLOO_SOCKET_IFNAME=ib0"}, "eth1"), std::nullopt);
  EXPECT_EQ(chooseSocketInterface({"PATH=/usr/bin"}, ""), std::nullopt);
  auto plan = twoByFour();
  Placement placed = secondMachine();
  placed.socket_interface = chooseSocketInterface({}, "eth1");
  EXPECT_TRUE(has(launcherVariables(plan, placed, WorkerSlot{}), "GLOO_SOCKET_IFNAME=eth1"));
  // The user's own value reaches the worker untouched (the parent's environment is inherited).
  placed.socket_interface = chooseSocketInterface({"GLOO_SOCKET_IFNAME=ib0"}, "eth1");
  auto env = workerEnvironment(plan, placed, WorkerSlot{}, {"GLOO_SOCKET_IFNAME=ib0"});
  EXPECT_TRUE(has(env, "GLOO_SOCKET_IFNAME=ib0"));
  EXPECT_FALSE(has(env, "GLOO_SOCKET_IFNAME=eth1"));
}

}  // namespace
}  // namespace accel::launcher
