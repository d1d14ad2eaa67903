// Whole StoreGroups — connect, meet, the link and its thread, a round's end, meeting again, the
// exit barrier — as agents of one job over the job's store in simulated time (sim_world.h,
// sim_group_store.h): no server, no socket, no port, and the exact instant of everything every
// agent does and is told. The rules alone are tested in rendezvous_sim_test.cc,
// round_close_sim_test.cc and job_link_test.cc; here they work together, as the agent runs them.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <gtest/gtest.h>

#include "launcher/rendezvous/c10d/store_rounds.h"
#include "launcher/rendezvous/round/keys.h"
#include "sim_agents.h"
#include "sim_group_store.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using testing::SimGroupStore;
using testing::SimStoreHost;
using testing::SimWorld;

// The master looks at the members every 100 ms (presence_check).
class StoreGroupTest : public testing::SimAgents {
 protected:
  ~StoreGroupTest() override {
    for (auto& [name, group] : groups_) {
      if (group) group->stopLink();
    }                 // their threads are the world's
    groups_.clear();  // before the store they reach
  }

  // Agent `name`: machine 0 (the store's host) when `master`, else ranked by arrival.
  RoundGroup& agent(const std::string& name, bool master, const LaunchPlan* plan = nullptr) {
    auto store = std::make_unique<SimGroupStore>(host_, master);
    stores_[name] = store.get();
    auto made = makeStoreGroup(plan ? *plan : plan_, env_, notifier(name),
                               master ? std::optional<int>(0) : std::nullopt, 29500,
                               std::move(store), world_);
    RoundGroup& g = *made;
    groups_[name] = std::move(made);
    return g;
  }
  Expected<void> connect(const std::string& name) override {
    return static_cast<RoundGroup&>(group(name)).connect();
  }

  SimStoreHost host_{*world_, "sim"};
  std::map<std::string, SimGroupStore*> stores_;
};

// Three machines meet at 0 ms (MAX: at once). gamma's agent dies at 1.05 s: its connections close,
// and the master's next look at the members' presence (every 100 ms from the round's start) finds
// it gone at 1.100 s — not after the keep-alive window. That look publishes the loss; both
// survivors hear it at that instant, agree on one decision there (a restart, counted once, for a
// group of two) and meet again as two, at once, in round 1.
TEST_F(StoreGroupTest, AMemberWhoseAgentDiesIsDroppedAndTheOthersMeetAgainAsTwo) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(met_ms_[n], 0) << n;
    EXPECT_EQ(placed_[n].world_size, 6) << n;
    EXPECT_EQ(placed_[n].rank_offset, 2 * placed_[n].machine_rank) << n;
    EXPECT_EQ(placed_[n].restart_count, 0) << n;
  }
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  const std::set<int> members{placed_["beta"].machine_rank, placed_["gamma"].machine_rank};
  EXPECT_EQ(members, (std::set<int>{1, 2}));
  const int gammaRank = placed_["gamma"].machine_rank;

  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"),
               at(1050ms, [this] { stores_["gamma"]->kill(); })});
  expectRestart({"alpha", "beta"}, 1100, LinkEvent::Kind::kRemoteFailure, /*counted=*/true, 1);
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].event.failure.reason,
              "lost: its agent is gone (its connection to the job's store closed)")
        << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, gammaRank) << n;
    EXPECT_EQ(decided_[n].expect_machines, 2) << n;
  }
  const auto lost = group("alpha").link()->lostMachines();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].machine, gammaRank);

  group("alpha").stopLink(), group("beta").stopLink();
  world_->run({meets("alpha", false), meets("beta", false)});
  expectMet({"alpha", "beta"}, 1100, 1, 4, 1);
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_TRUE(said("alpha", "1100 ms: machine 0 of 2: ranks 0\u20131 of 4"));
}

// gamma's machine goes silent at 0.8 s (SIGSTOP, or its link down: its connections stay open, so
// its presence does not go). Its last keep-alive was at 0.75 s (every 250 ms from the round's
// start), which the master's look at 0.8 s saw move; 4 missed keep-alives (1 s) after that look,
// the look at 1.800 s finds it lost — not before — and both survivors hear it then and decide.
TEST_F(StoreGroupTest, ASilentMemberIsLostOneKeepAliveWindowAfterItsKeepAlivesStopped) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"),
               at(800ms, [this] { stores_["gamma"]->freeze(true); })});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].at_ms, 1800) << n;
    EXPECT_EQ(heard_[n].event.kind, LinkEvent::Kind::kRemoteFailure) << n;
    EXPECT_EQ(heard_[n].event.failure.reason,
              "lost: no keep-alive for 1 s (keep_alive_interval 0.25 s x keep_alive_max_attempt 4)")
        << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, placed_["gamma"].machine_rank) << n;
    EXPECT_EQ(decided_ms_[n], 1800) << n;
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(decided_[n].expect_machines, 2) << n;
  }
}

// --nnodes 2:3: alpha and beta close round 0 at the last call (0.3 s after MIN). delta arrives at
// 1 s and registers for round 1; the master's link looks for arrivals at its keep-alive ticks
// (0.3, 0.55, 0.8, 1.05 s) and at 1.050 s publishes the group's growth — no failure, no restart
// counted: both members hear it then and the group re-forms as three at that instant, every
// worker told restart count 0. beta keeps its place (machine 1) although delta registered for
// round 1 first: the members of the round before come before newcomers, as on etcd.
TEST_F(StoreGroupTest, AMachineArrivingGrowsTheGroupWithoutARestart) {
  agent("alpha", true), agent("beta", false);
  world_->run({meets("alpha", true), meets("beta", true)});
  EXPECT_EQ(met_ms_["alpha"], 300);
  EXPECT_EQ(placed_["alpha"].world_size, 4);
  agent("delta", false);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), meets("delta", true, 1000ms)});
  expectRestart({"alpha", "beta"}, 1050, LinkEvent::Kind::kGroupGrows, /*counted=*/false, 0);
  expectMet({"alpha", "beta", "delta"}, 1050, 1, 6, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_EQ(placed_["delta"].machine_rank, 2);
  EXPECT_EQ(placed_["delta"].rank_offset, 4);
}

// A group of three is full (MAX). delta arrives at 0.5 s and waits for the next round: the
// master's link does not re-form a full group for it. gamma's agent dies at 1.05 s, found at
// 1.100 s; the round's end counts delta among those waiting, so round 1 expects three and closes
// at 1.100 s with delta — one restart, for the loss. The survivors keep their order (alpha 0,
// beta 1, whichever beta was) and delta, although it registered first, comes after them.
TEST_F(StoreGroupTest, AMachineBeyondMaxWaitsAndTakesTheLostMachinesPlace) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  agent("delta", false);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), meets("delta", true, 500ms),
               at(1050ms, [this] { stores_["gamma"]->kill(); })});
  expectRestart({"alpha", "beta"}, 1100, LinkEvent::Kind::kRemoteFailure, /*counted=*/true, 1);
  EXPECT_EQ(decided_["alpha"].expect_machines, 3);
  expectMet({"alpha", "beta", "delta"}, 1100, 1, 6, 1);
  EXPECT_TRUE(said("delta",
                   "500 ms: round 0 is full (3 machines, the most the job takes): this machine "
                   "waits as a spare for a later round"));
  EXPECT_TRUE(said("beta", "1100 ms: machine 1 of 3: ranks 2\u20133 of 6"));
  EXPECT_TRUE(said("delta", "1100 ms: machine 2 of 3: ranks 4\u20135 of 6"));
}

// The master's machine dies at 1.05 s, and the job's store with it: the others' failure watches
// end at that instant (their connections close), both hear that the store is lost, and neither
// waits for a decision that cannot come — the job ends there.
TEST_F(StoreGroupTest, TheStoresHostLostEndsTheOthersAtOnce) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  world_->run({hearsAndEnds("beta"), hearsAndEnds("gamma"),
               at(1050ms, [this] { stores_["alpha"]->kill(); })});
  for (const std::string n : {"beta", "gamma"}) {
    EXPECT_EQ(heard_[n].at_ms, 1050) << n;
    EXPECT_EQ(heard_[n].event.kind, LinkEvent::Kind::kRemoteFailure) << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 0) << n;
    EXPECT_NE(heard_[n].event.failure.reason.find("sim:29500"), std::string::npos)
        << heard_[n].event.failure.reason;
    EXPECT_EQ(decided_ms_[n], 1050) << n;
    EXPECT_FALSE(decided_[n].restart) << n;
  }
}

// gamma's machine is cut off from the store's at 1.05 s, for good. Its failure watch fails once
// its TCP keep-alives give up (5 s later, seen at its link's next tick), a knock gets no answer
// within 1 s: the store is out of reach, not gone, so gamma stops its workers and tries to reach
// it again (no restart counted) — for 60 s, knocking every second; then its meet() ends, saying
// why. The others went on as two meanwhile.
TEST_F(StoreGroupTest, AMachineCutOffForGoodTriesToReachTheStoreForAMinuteThenSaysWhy) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  std::optional<Expected<Placement>> gammaMet;
  int64_t gammaMetMs = -1;
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({hearsAndEnds("gamma"),
                     [&] {
                       gammaMet.emplace(group("gamma").meet());
                       gammaMetMs = world_->nowMs();
                     }}),
               at(1050ms, [this] { stores_["gamma"]->cutOff(true); })});
  EXPECT_EQ(placed_["alpha"].num_machines, 2);
  EXPECT_GE(heard_["gamma"].at_ms, 1050 + 5000);
  EXPECT_LE(heard_["gamma"].at_ms, 1050 + 5000 + 250);  // a keep-alive interval
  EXPECT_EQ(heard_["gamma"].event.failure.machine_rank, 0);
  EXPECT_TRUE(decided_["gamma"].restart) << decided_["gamma"].why;
  EXPECT_FALSE(decided_["gamma"].counted);
  EXPECT_EQ(decided_ms_["gamma"], heard_["gamma"].at_ms + 1000);  // one knock, unanswered
  EXPECT_NE(decided_["gamma"].why.find("the master agent's store at sim:29500 does not answer; "
                                       "this machine tries to reach it again for up to 60 s"),
            std::string::npos)
      << decided_["gamma"].why;
  ASSERT_TRUE(gammaMet.has_value());
  ASSERT_FALSE(gammaMet->ok());
  EXPECT_EQ(gammaMet->error(),
            "the master agent's store at sim:29500 did not answer for 60 s: machine 0 is down, "
            "or this machine is still cut off from it; this machine cannot go on without it");
  EXPECT_EQ(gammaMetMs, decided_ms_["gamma"] + 60000);
}

// Ctrl-C while a machine cut off tries to reach the store again ends the tries once the knock
// under way ends (a connection's try, at most 1 s): not after the minute.
TEST_F(StoreGroupTest, AnInterruptEndsTheTriesToReachTheStoreAgainWithinAKnock) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  world_->run({hearsAndEnds("gamma"), at(1050ms, [this] { stores_["gamma"]->cutOff(true); })});
  ASSERT_TRUE(decided_["gamma"].restart) << decided_["gamma"].why;
  std::optional<Expected<Placement>> met;
  int64_t metMs = -1;
  world_->run({[&] {
                 met.emplace(group("gamma").meet());
                 metMs = world_->nowMs();
               },
               at(20000ms, [this] { group("gamma").interrupt(); })});
  ASSERT_TRUE(met.has_value());
  ASSERT_FALSE(met->ok());
  EXPECT_EQ(met->error(),
            "interrupted while it tried to reach the master agent's store at sim:29500 again");
  EXPECT_GE(metMs, 20000);
  EXPECT_LE(metMs, 21000);
}

// Ctrl-C or SIGTERM while an agent waits in a later round's rendezvous: the supervisor turns
// either into interrupt() (SignalWhileMeeting, supervisor_test.cc); here the real group's side.
// The master waits in round 1 for a machine that never comes (MIN is 2, --rdzv_timeout 900 s);
// interrupted at 2 s, its meet() returns an error at that instant — not the rendezvous' timeout,
// and not a placement.
TEST_F(StoreGroupTest, AnInterruptEndsTheMeetingOfALaterRoundAtOnce) {
  agent("alpha", true), agent("beta", false);
  world_->run({meets("alpha", true), meets("beta", true)});
  const std::string error = interruptedWhileMeeting("alpha", 2000ms);
  EXPECT_NE(error.find("interrupted"), std::string::npos) << error;
}

// The exit barrier: beta leaves at 0.5 s, gamma at 0.81 s (each reports its workers finished,
// then its process ends). The master, which looks every 20 ms, sees every machine finished at
// 0.820 s and passes the barrier then — after both left, and without saying it stops the store
// early.
TEST_F(StoreGroupTest, TheExitBarrierHoldsTheStoreUntilTheMembersLeft) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  world_->run({meets("alpha", true), meets("beta", true), meets("gamma", true)});
  std::vector<std::string> order;  // guarded by mutex_
  auto note = [&](const std::string& what) {
    std::lock_guard lock(mutex_);
    order.push_back(std::to_string(world_->nowMs()) + " ms: " + what);
  };
  auto leaves = [&](const std::string& n) {
    group(n).stopLink();
    group(n).awaitOtherMachines();
    note(n + " left");
    groups_.at(n).reset();  // its process ends: its presence goes
  };
  world_->run({[&] {
                 group("alpha").stopLink();
                 group("alpha").awaitOtherMachines();
                 note("alpha passed the barrier");
               },
               at(500ms, [&] { leaves("beta"); }), at(810ms, [&] { leaves("gamma"); })});
  EXPECT_EQ(order, (std::vector<std::string>{"500 ms: beta left", "810 ms: gamma left",
                                             "820 ms: alpha passed the barrier"}));
  EXPECT_EQ(host_.presentCount(), 1u);  // alpha's own presence, until its group goes
  for (const auto& line : said_["alpha"]) {
    EXPECT_EQ(line.find("stopping the job's store although"), std::string::npos) << line;
  }
}

// A value that is not a round where the master keeps the round it opened last (another program
// writes under the job's keys): the arriving agent's error names the store, the key and the value
// — not "cannot reach", and no std::invalid_argument ending the agent.
TEST_F(StoreGroupTest, AMalformedOpenRoundIsAnErrorNamingStoreKeyAndValue) {
  agent("alpha", true), agent("beta", false);
  std::optional<Expected<void>> refused;
  world_->run({[this] {
                 ASSERT_TRUE(connect("alpha").ok());
                 std::lock_guard lock(world_->mutex());
                 host_.data().set(JobKeys("sim").openRound(), "twelve");
               },
               at(10ms, [&] { refused.emplace(connect("beta")); })});
  ASSERT_TRUE(refused.has_value());
  ASSERT_FALSE(refused->ok());
  EXPECT_EQ(refused->error(), "the store at sim:29500: the key '" + JobKeys("sim").openRound() +
                                  "' holds 'twelve', not a number (another program writes under "
                                  "this job's keys?)");
}

TEST_F(StoreGroupTest, AnAgentOfAnotherJobOnTheSameStoreIsRefusedNamingBothJobs) {
  LaunchPlan other = plan_;
  other.rendezvous_id = "other";
  agent("alpha", true), agent("intruder", false, &other);
  std::optional<Expected<void>> refused;
  world_->run({[this] { ASSERT_TRUE(connect("alpha").ok()); },
               at(10ms, [&] { refused.emplace(connect("intruder")); })});
  ASSERT_TRUE(refused.has_value());
  ASSERT_FALSE(refused->ok());
  EXPECT_NE(refused->error().find("serves job 'sim'"), std::string::npos) << refused->error();
  EXPECT_NE(refused->error().find("this machine's job is 'other'"), std::string::npos)
      << refused->error();
}

}  // namespace
}  // namespace accel::launcher
