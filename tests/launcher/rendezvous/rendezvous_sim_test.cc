// The rounds' rules with several agents, in simulated time (sim_world.h): when a round closes
// and with whom, what a machine beyond MAX, a machine that joins and dies, a missing machine
// and a silent member cost, to the millisecond — 900 s of rendezvous in a few milliseconds.

#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <gtest/gtest.h>

#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/round_end.h"
#include "sim_world.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using testing::SimClient;
using testing::SimWorld;

// What one agent's rendezvous gave it, and when.
struct Outcome {
  int64_t at_ms = -1;
  std::optional<RendezvousResult> result;
  std::string error;
};

class RendezvousSimTest : public ::testing::Test {
 protected:
  // An agent of a job of MIN:MAX machines (2 local ranks each) with a last call of 8 s;
  // `rank` 0 is the master.
  GroupSettings settings(const std::string& host, std::optional<int> rank) {
    GroupSettings o;
    o.run_id = "sim";
    o.min_machines = min_;
    o.num_machines = max_;
    o.requested_machine_rank = rank;
    o.local_world_size = 2;
    o.host = o.presence = host;
    o.store_address = "sim:29500";
    o.timeouts.last_call = 8s;
    o.clock = world_;
    o.present = [this](const std::string& token) { return client(token).present(); };
    return o;
  }

  // Thread-safe: agents look at each other's presence.
  SimClient& client(const std::string& host) {
    std::lock_guard lock(clients_mutex_);
    auto& c = clients_[host];
    if (!c) c = std::make_unique<SimClient>(*world_, data_);
    return *c;
  }

  // An agent that arrives at `arrive` and joins the round `start`.
  std::function<void()> agent(const std::string& host, std::optional<int> rank,
                              std::chrono::milliseconds arrive, RoundStart start = {}) {
    GroupSettings o = settings(host, rank);
    SimClient& store = client(host);
    Outcome& out = outcomes_[host];  // made here: the agents' threads must not insert at once
    return [this, o, &store, &out, arrive, start] {
      world_->sleepUntil(SimWorld::at(arrive));
      auto r = rendezvous(store, o, start);
      out.at_ms = world_->nowMs();
      if (r) {
        out.result = *r;
      } else {
        out.error = r.error();
      }
    };
  }

  int min_ = 2, max_ = 4;
  std::shared_ptr<SimWorld> world_ = std::make_shared<SimWorld>();
  store::MemoryStore data_;
  std::mutex clients_mutex_;
  std::map<std::string, std::unique_ptr<SimClient>> clients_;
  std::map<std::string, Outcome> outcomes_;  // made before run(); each written by its agent only
};

// --nnodes 2:4, last_call_timeout=8: MIN is there at 1 s (the second machine), so the round
// closes 8 s later — at 9.000 s for both, not before and not at the next progress look — with
// the two machines, ranks in arrival order.
TEST_F(RendezvousSimTest, TheLastCallClosesTheFirstRoundAfterMinJoined) {
  world_->run({agent("alpha", 0, 0ms), agent("beta", std::nullopt, 1000ms)});
  for (const char* host : {"alpha", "beta"}) {
    const Outcome& o = outcomes_.at(host);
    ASSERT_TRUE(o.result) << host << ": " << o.error;
    EXPECT_EQ(o.at_ms, 9000) << host;
    EXPECT_EQ(o.result->world_size, 4);
    EXPECT_EQ(o.result->size, 2);
  }
  EXPECT_EQ(outcomes_.at("beta").result->machine_rank, 1);
  EXPECT_EQ(outcomes_.at("beta").result->rank_offset, 2);
}

// --nnodes 1:3: the master alone is MIN, so the last call starts as it registers: closed at
// 8.000 s with one machine (not 8 s after its first progress look).
TEST_F(RendezvousSimTest, AMasterThatIsMinAloneStartsTheLastCallAtOnce) {
  min_ = 1;
  max_ = 3;
  world_->run({agent("alpha", 0, 0ms)});
  const Outcome& o = outcomes_.at("alpha");
  ASSERT_TRUE(o.result) << o.error;
  EXPECT_EQ(o.at_ms, 8000);
  EXPECT_EQ(o.result->size, 1);
}

// The stall: a third machine joins at 3.8 s and its agent dies at 4 s. The round still
// closes at 9.000 s, with the two that are there; the dead one is no member (before, the round
// took it and the others' workers waited for it until --rdzv_timeout).
TEST_F(RendezvousSimTest, AMachineThatJoinsAndDiesBeforeTheCloseIsDropped) {
  client("gamma").cutAt(SimWorld::at(4000ms));
  world_->run({agent("alpha", 0, 0ms), agent("beta", std::nullopt, 1000ms),
               agent("gamma", std::nullopt, 3800ms)});
  EXPECT_EQ(outcomes_.at("gamma").at_ms, 4000);  // its connection closed under it
  for (const char* host : {"alpha", "beta"}) {
    const Outcome& o = outcomes_.at(host);
    ASSERT_TRUE(o.result) << host << ": " << o.error;
    EXPECT_EQ(o.at_ms, 9000) << host;
    EXPECT_EQ(o.result->size, 2);
  }
  ASSERT_EQ(outcomes_.at("alpha").result->machines.size(), 2u);  // the master's: every member
  EXPECT_EQ(outcomes_.at("alpha").result->machines[1].host, "beta");
}

// --nnodes 1:2: the second machine fills the group at 0.5 s and the round closes then, at once;
// a third that arrives at 2 s is a spare of that round (told the round's size), at 2.000 s.
TEST_F(RendezvousSimTest, AMachineBeyondMaxIsASpare) {
  min_ = 1;
  max_ = 2;
  world_->run({agent("alpha", 0, 0ms), agent("beta", std::nullopt, 500ms),
               agent("gamma", std::nullopt, 2000ms)});
  EXPECT_EQ(outcomes_.at("alpha").at_ms, 500);
  EXPECT_EQ(outcomes_.at("beta").at_ms, 500);
  const Outcome& spare = outcomes_.at("gamma");
  ASSERT_TRUE(spare.result) << spare.error;
  EXPECT_EQ(spare.at_ms, 2000);
  EXPECT_TRUE(spare.result->spare);
  EXPECT_EQ(spare.result->round_size, 2);
}

// A group re-forming after a loss knows its survivors: round 1 expects 2 and closes the moment
// the second is back (0.3 s), without the last call; its workers see the master's restart count.
TEST_F(RendezvousSimTest, AReformingGroupClosesWhenTheSurvivorsAreBack) {
  min_ = 1;
  max_ = 3;
  const RoundStart next{1, 1, 2};
  world_->run({agent("alpha", 0, 0ms, next), agent("beta", std::nullopt, 300ms, next)});
  for (const char* host : {"alpha", "beta"}) {
    const Outcome& o = outcomes_.at(host);
    ASSERT_TRUE(o.result) << host << ": " << o.error;
    EXPECT_EQ(o.at_ms, 300) << host;
    EXPECT_EQ(o.result->restart_count, 1);
  }
}

// The members of the round before keep their order: beta (machine 1) and gamma (machine 2) of
// round 0 register for round 1 the other way round, with delta, a newcomer, first of all; round 1
// ranks alpha 0, beta 1, gamma 2, delta 3 — as on etcd — not by arrival.
TEST_F(RendezvousSimTest, TheRoundBeforesMembersKeepTheirOrder) {
  min_ = 1;
  max_ = 3;  // round 0 closes as the third registers (200 ms); then a fourth has room
  world_->run({agent("alpha", 0, 0ms), agent("beta", std::nullopt, 100ms),
               agent("gamma", std::nullopt, 200ms)});
  ASSERT_TRUE(outcomes_.at("gamma").result);
  EXPECT_EQ(outcomes_.at("gamma").result->machine_rank, 2);
  max_ = 4;
  const RoundStart next{1, 1, 4};
  world_->run({agent("delta", std::nullopt, 1000ms, next),
               agent("gamma", std::nullopt, 1100ms, next),
               agent("beta", std::nullopt, 1200ms, next), agent("alpha", 0, 1300ms, next)});
  const std::map<std::string, int> expected{{"alpha", 0}, {"beta", 1}, {"gamma", 2}, {"delta", 3}};
  for (const auto& [host, rank] : expected) {
    const Outcome& o = outcomes_.at(host);
    ASSERT_TRUE(o.result) << host << ": " << o.error;
    EXPECT_EQ(o.at_ms, 1300) << host;
    EXPECT_EQ(o.result->machine_rank, rank) << host;
    EXPECT_EQ(o.result->rank_offset, 2 * rank) << host;
  }
}

// A static job of 3 whose third machine never comes: the master gives up at exactly the join
// timeout (900 s) and the other machine learns why at that instant, not after its own timeout.
// Meanwhile the master said who is missing every 5 s.
TEST_F(RendezvousSimTest, AMissingMachineFailsEveryoneAtTheJoinTimeout) {
  min_ = max_ = 3;
  std::vector<int64_t> progressAt;
  GroupSettings withProgress = settings("alpha", 0);
  withProgress.progress = [&](const std::string& status) {
    EXPECT_EQ(status, "2/3 machines joined");
    progressAt.push_back(world_->nowMs());
  };
  Outcome& alpha = outcomes_["alpha"];
  SimClient& alphaStore = client("alpha");
  world_->run({[&] {
                 auto r = rendezvous(alphaStore, withProgress, {});
                 alpha = {world_->nowMs(), std::nullopt, r ? "" : r.error()};
               },
               agent("beta", std::nullopt, 0ms)});
  const std::string why = "rendezvous at sim:29500 timed out after 900 s: 2/3 machines joined";
  EXPECT_EQ(outcomes_.at("alpha").at_ms, 900000);
  EXPECT_EQ(outcomes_.at("alpha").error, why);
  EXPECT_EQ(outcomes_.at("beta").at_ms, 900000);
  EXPECT_EQ(outcomes_.at("beta").error, "rendezvous failed: " + why);
  ASSERT_GE(progressAt.size(), 3u);
  EXPECT_EQ(progressAt[1] - progressAt[0], 5000);
  EXPECT_EQ(progressAt.back(), 895000);
}

// The exit barrier once another machine published a failure at 2 s and never finishes: the
// master keeps its store up for exit_after_failure (15 s) from the look that saw the failure,
// then goes — at 17.00–17.04 s (its looks are 20 ms apart).
TEST_F(RendezvousSimTest, TheExitBarrierAfterAFailureLastsItsBound) {
  min_ = max_ = 2;
  int64_t masterLeft = -1;
  int done = 0;
  world_->run({[&] {
                 GroupSettings o = settings("alpha", 0);
                 done = exitBarrier(client("alpha"), o, 0, 2, true, 15s, {});
                 masterLeft = world_->nowMs();
               },
               [&] {
                 world_->sleepUntil(SimWorld::at(2000ms));
                 JobFailure f;
                 f.machine_rank = 1;
                 f.host = "beta";
                 publishStop(client("beta"), settings("beta", 1), 0, RoundStop::failed(f));
               }});
  EXPECT_EQ(done, 1);
  EXPECT_GE(masterLeft, 17000);
  EXPECT_LE(masterLeft, 17040);
}

// The master is never silent between its summary and its exit: with machine 1's failure
// published before the barrier and machine 1 never finishing, it says once, at its first look
// past exit_notice (1 s), how many finished and how long it may still wait, then goes at 15 s.
TEST_F(RendezvousSimTest, TheExitBarrierSaysWhyItWaitsOnce) {
  min_ = max_ = 2;
  JobFailure f;
  f.machine_rank = 1;
  publishStop(client("beta"), settings("beta", 1), 0, RoundStop::failed(f));
  std::vector<std::pair<int64_t, std::string>> said;
  int64_t masterLeft = -1;
  world_->run({[&] {
    GroupSettings o = settings("alpha", 0);
    exitBarrier(client("alpha"), o, 0, 2, true, 15s, {},
                [&](const std::string& text) { said.emplace_back(world_->nowMs(), text); });
    masterLeft = world_->nowMs();
  }});
  ASSERT_EQ(said.size(), 1u);
  EXPECT_GE(said[0].first, 1000);
  EXPECT_LE(said[0].first, 1020);
  EXPECT_EQ(said[0].second,
            "1/2 machines reported their workers finished: this machine keeps the job's store up "
            "for the others, at most 14 s more");
  EXPECT_GE(masterLeft, 15000);
  EXPECT_LE(masterLeft, 15040);
}

// The master waits for the members' ends of a failed round: machine 1 reports at 1 s; machine 2
// never does and is found lost at 3 s, so the master goes on at 3.0–3.1 s (its looks at the lost
// are 100 ms apart) instead of waiting out the close timeout (35 s) — which it does, exactly,
// when nobody says machine 2 is lost.
TEST_F(RendezvousSimTest, RoundEndsWaitForTheLostOnlyUntilTheyAreFoundLost) {
  min_ = max_ = 3;
  for (bool lostKnown : {true, false}) {
    std::vector<RoundEnd> ends;
    int64_t decidedAt = -1;
    const int round = lostKnown ? 0 : 1;
    world_ = std::make_shared<SimWorld>();
    clients_.clear();
    world_->run({[&] {
                   GroupSettings o = settings("alpha", 0);
                   auto lostNow = [&]() -> std::vector<int> {
                     if (lostKnown && world_->now() >= SimWorld::at(3000ms)) return {2};
                     return {};
                   };
                   reportRoundEnd(client("alpha"), o, round, RoundEnd{0, "alpha", true, ""});
                   ends = awaitRoundEnds(client("alpha"), o, round, 3, 35s, lostNow);
                   decidedAt = world_->nowMs();
                 },
                 [&] {
                   world_->sleepUntil(SimWorld::at(1000ms));
                   reportRoundEnd(client("beta"), settings("beta", 1), round,
                                  RoundEnd{1, "beta", true, ""});
                 }});
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[1].machine_rank, 1);
    if (lostKnown) {
      EXPECT_GE(decidedAt, 3000);
      EXPECT_LE(decidedAt, 3100);
    } else {
      EXPECT_EQ(decidedAt, 35000);
    }
  }
}

}  // namespace
}  // namespace accel::launcher
