// Whole EtcdGroups — connect (the lease and its thread), meet on etcd, the round's link and its
// thread, a round's end decided by every agent, meeting again — as agents of one job over a
// simulated etcd cluster in simulated time (sim_etcd.h, sim_agents.h): the exact instant of
// everything every agent does and is told, where etcd's leases, elections and endpoints decide
// it. The same pieces against a real etcd: etcd_round_test.cc, etcd_lease_test.cc,
// etcd_link_test.cc, and e2e netns_elastic.sh's etcd cases.

#include "launcher/rendezvous/etcd_group.h"

#include <map>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "launcher/rendezvous/job_keys.h"
#include "sim_agents.h"
#include "sim_etcd.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using testing::SimEtcd;
using testing::SimProcess;
using testing::SimWorld;

// Leases of 1 s (keep-alives every 250 ms, 4 misses), renewed every 250 ms from the connect.
class EtcdGroupTest : public testing::SimAgents {
 protected:
  EtcdGroupTest() { plan_.local_addr = "127.0.0.1"; }
  ~EtcdGroupTest() override {
    for (auto& [name, process] : processes_) etcd_.kill(*process);  // every call ends at once
    groups_.clear();                                                // before etcd
  }

  // Agent `name`, whose own store (machine 0's serves the workers) is at `port`.
  EtcdGroup& agent(const std::string& name, int port) {
    auto process = std::make_shared<SimProcess>();
    processes_[name] = process;
    auto made = std::make_unique<EtcdGroup>(plan_, env_, notifier(name), etcd_.options(), "", port,
                                            nullptr, etcd_.access(process));
    EtcdGroup& g = *made;
    groups_[name] = std::move(made);
    return g;
  }
  Expected<void> connect(const std::string& name) override {
    return static_cast<EtcdGroup&>(group(name)).connect();
  }
  void kill(const std::string& name) { etcd_.kill(*processes_.at(name)); }
  // alpha, beta and gamma arrive at 0, 10 and 20 ms and meet at 20 ms (MAX), machines 0, 1, 2.
  void threeMeet() {
    agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502);
    world_->run({meets("alpha", true), meets("beta", true, 10ms), meets("gamma", true, 20ms)});
    int rank = 0;
    for (const std::string n : {"alpha", "beta", "gamma"}) {
      EXPECT_EQ(met_ms_[n], 20) << n;
      EXPECT_EQ(placed_[n].machine_rank, rank) << n;
      EXPECT_EQ(placed_[n].rank_offset, 2 * rank++) << n;
      EXPECT_EQ(placed_[n].world_size, 6) << n;
      EXPECT_EQ(placed_[n].restart_count, 0) << n;
      EXPECT_EQ(placed_[n].master_port, 29500) << n;
    }
  }

  // At `t`, `name`'s workers fail (local rank 0, exit `code`, `line` last): its link publishes
  // the failure; when the link says it stands (or another came first), the agent takes part in
  // the round's end.
  std::function<void()> failsAndEnds(const std::string& name, std::chrono::milliseconds t, int code,
                                     const std::string& line) {
    return at(t, [this, name, code, line] {
      JobFailure f;
      f.machine_rank = placed_.at(name).machine_rank;
      f.host = thisHostName();
      f.local_rank = 0;
      f.rank = placed_.at(name).rank_offset;
      f.exit_code = code;
      f.stderr_tail = {"Traceback (most recent call last):", line};
      ASSERT_TRUE(group(name).link()->publish(f)) << name;
      hearsAndEnds(name)();
    });
  }

  SimEtcd etcd_{world_, 3};
  std::map<std::string, std::shared_ptr<SimProcess>> processes_;
};

// Three machines arrive at 0, 10 and 20 ms and meet at 20 ms (MAX: at once), in arrival order.
// gamma's agent dies at 1.05 s: its last renewal (every 250 ms from its connect at 20 ms) was at
// 1.02 s, so etcd ends its lease — and its registration — at 2.02 s; every survivor's link sees the
// registration go then, and the first to publish it stands. Both hear it at 2.020 s, decide one
// counted restart for a group of two there, and meet again as two at once, in their order.
TEST_F(EtcdGroupTest, AMemberWhoseAgentDiesIsLostWhenItsLeaseEnds) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"), at(1050ms, [this] { kill("gamma"); })});
  expectRestart({"alpha", "beta"}, 2020, LinkEvent::Kind::kRemoteFailure, /*counted=*/true, 1);
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].event.failure.reason,
              "lost: its lease expired (no keep-alive reached etcd for 1 s)")
        << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 2) << n;
    EXPECT_EQ(decided_[n].expect_machines, 2) << n;
  }
  const auto lost = group("alpha").link()->lostMachines();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].machine, 2);

  world_->run({meets("alpha", false), meets("beta", false)});
  expectMet({"alpha", "beta"}, 2020, 1, 4, 1);
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
}

// gamma's agent stops (SIGSTOP) at 1.05 s: its renewals stop with it, its lease ends at 2.02 s
// and the others drop it then, as if it had died. It thaws at 3 s: its next renewal is told the
// lease ended, so it knows at that instant that it is no longer in the job — its workers stop and
// its round's end restarts nothing here (the others re-formed without it).
TEST_F(EtcdGroupTest, AFrozenAgentIsDroppedWhenItsLeaseEndsAndStopsWhenItThaws) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"), hearsAndEnds("gamma"),
               at(1050ms, [this] { etcd_.freeze(*processes_.at("gamma"), true); }),
               at(3000ms, [this] { etcd_.freeze(*processes_.at("gamma"), false); })});
  expectRestart({"alpha", "beta"}, 2020, LinkEvent::Kind::kRemoteFailure, /*counted=*/true, 1);
  EXPECT_EQ(heard_["alpha"].event.failure.machine_rank, 2);
  EXPECT_EQ(heard_["gamma"].at_ms, 3000);
  EXPECT_EQ(heard_["gamma"].event.kind, LinkEvent::Kind::kRemoteFailure);
  EXPECT_EQ(heard_["gamma"].event.failure.machine_rank, 2);
  EXPECT_EQ(decided_ms_["gamma"], 3000);
  EXPECT_FALSE(decided_["gamma"].restart) << decided_["gamma"].why;
}

// beta and gamma die together at 1.05 s; their leases end at 2.01 and 2.02 s (renewed last at
// 1.01 and 1.02 s). alpha hears the first loss at 2.010 s; its round's end waits until every
// member is reported or lost, looking at the lost machines every 100 ms (round_end_poll) while
// one is missing, so it decides at 2.110 s: one machine is fewer than the job's MIN of two, so no
// restart.
TEST_F(EtcdGroupTest, BelowMinTheSurvivorStopsOnceEveryLossIsKnown) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), at(1050ms, [this] {
                 kill("beta");
                 kill("gamma");
               })});
  EXPECT_EQ(heard_["alpha"].at_ms, 2010);
  EXPECT_EQ(heard_["alpha"].event.failure.machine_rank, 1);
  EXPECT_EQ(decided_ms_["alpha"], 2110);
  EXPECT_FALSE(decided_["alpha"].restart);
  EXPECT_EQ(group("alpha").link()->lostMachines().size(), 2u);
  EXPECT_NE(decided_["alpha"].why.find("1 of the 2 machines the job needs"), std::string::npos)
      << decided_["alpha"].why;
}

// No machine is the job's single point of failure: machine 0 (alpha, whose store serves the
// workers) dies at 1.05 s, its lease ends at 2 s (renewed last at 1 s), and the others hear it
// then like any loss and re-form at once: beta, machine 1 before, is machine 0 of round 1 and its
// own store (port 29501) serves the workers.
TEST_F(EtcdGroupTest, MachineZeroLostIsLikeAnyOtherAndTheNextServesTheWorkers) {
  threeMeet();
  world_->run({hearsAndEnds("beta"), hearsAndEnds("gamma"), at(1050ms, [this] { kill("alpha"); })});
  for (const std::string n : {"beta", "gamma"}) {
    EXPECT_EQ(heard_[n].at_ms, 2000) << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 0) << n;
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(decided_[n].restart_count, 1) << n;
  }
  world_->run({meets("beta", false), meets("gamma", false)});
  EXPECT_EQ(placed_["beta"].machine_rank, 0);
  EXPECT_EQ(placed_["gamma"].machine_rank, 1);
  for (const std::string n : {"beta", "gamma"}) {
    EXPECT_EQ(met_ms_[n], 2000) << n;
    EXPECT_EQ(placed_[n].master_port, 29501) << n;
  }
  EXPECT_TRUE(said("gamma",
                   "2000 ms: machine 1 of 2: ranks 2\u20133 of 4; the workers' store is machine "
                   "0's (" +
                       thisHostName() + ", 127.0.0.1:29501)"));
}

// --nnodes 2:3: alpha and beta are MIN at 10 ms and the last call (300 ms) closes round 0 at
// 310 ms. delta arrives at 1 s: it says round 0 closed without it, and registers for round 1;
// both members' links see the registration at that instant and the group re-forms to take it —
// no failure, no restart counted (every worker told restart count 0) — as three, at 1 s, the
// members first in their order.
TEST_F(EtcdGroupTest, AMachineArrivingGrowsTheGroupWithoutARestart) {
  agent("alpha", 29500), agent("beta", 29501);
  world_->run({meets("alpha", true), meets("beta", true, 10ms)});
  EXPECT_EQ(met_ms_["alpha"], 310);
  EXPECT_EQ(met_ms_["beta"], 310);
  agent("delta", 29503);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), meets("delta", true, 1000ms)});
  expectRestart({"alpha", "beta"}, 1000, LinkEvent::Kind::kGroupGrows, /*counted=*/false, 0);
  expectMet({"alpha", "beta", "delta"}, 1000, 1, 6, 0);
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_EQ(placed_["delta"].machine_rank, 2);
  EXPECT_TRUE(said("delta",
                   "1000 ms: round 0 closed with 2 of at most 3 machines just before this machine "
                   "joined it: it joins the next round, which the group forms to take it"));
}

// A group of three is full (MAX). delta arrives at 0.5 s, says it waits as a spare and registers
// for round 1, which no link re-forms a full group for. gamma dies at 1.05 s, its lease ends at
// 2.02 s; the round's end counts delta among those waiting, so round 1 expects three and closes at
// 2.020 s with delta after the survivors — one restart, for the loss.
TEST_F(EtcdGroupTest, AMachineBeyondMaxWaitsAndTakesTheLostMachinesPlace) {
  threeMeet();
  agent("delta", 29503);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), meets("delta", true, 500ms),
               at(1050ms, [this] { kill("gamma"); })});
  expectRestart({"alpha", "beta"}, 2020, LinkEvent::Kind::kRemoteFailure, /*counted=*/true, 1);
  EXPECT_EQ(decided_["alpha"].expect_machines, 3);
  expectMet({"alpha", "beta", "delta"}, 2020, 1, 6, 1);
  EXPECT_EQ(placed_["delta"].machine_rank, 2);
  EXPECT_TRUE(said("delta",
                   "500 ms: round 0 is full (3 machines, the most the job takes): this machine "
                   "waits as a spare for a later round"));
}

// etcd elects a new leader for 3 s (1.1 s to 4.1 s), three times the leases' TTL: no renewal
// lands meanwhile, but no lease expires either, and the new leader gives each its TTL again — so
// no agent calls its own lease lost (it allows the window and 5 s more) and no machine is
// dropped: at 10 s every link is silent and every registration there.
TEST_F(EtcdGroupTest, ALeaderElectionLongerThanTheWindowCostsNoMachine) {
  threeMeet();
  bool anyHeard = false;
  auto quiet = [&](const std::string& n) {
    return [&, n] {
      if (world_->awaitReadable(group(n).link()->fd(), SimWorld::at(10s))) anyHeard = true;
    };
  };
  world_->run({quiet("alpha"), quiet("beta"), quiet("gamma"),
               at(1100ms, [this] { etcd_.loseLeader(); }),
               at(4100ms, [this] { etcd_.electLeader(); })});
  EXPECT_FALSE(anyHeard);
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(group(n).link()->takeEvents().empty()) << n;
  }
  EXPECT_EQ(etcd_.keysUnder(JobKeys("sim").round(0).memberPrefix()).size(), 3u);
}

// etcd out of reach for good from 1.1 s (every endpoint refuses): alpha's last renewal landed at
// 1 s; its renewals (one interval each, 250 ms, then the next tick 250 ms on) fail from 1.25 s,
// and the one that starts at 7.25 s — the window (1 s) and 5 s more after the last that landed —
// ends at 7.5 s with the lease called lost. Its link says so as this machine's end; its round's
// end restarts nothing (the others, if etcd comes back, have dropped it).
TEST_F(EtcdGroupTest, EtcdOutOfReachForTheWindowAndTheElectionAllowanceEndsTheJobHere) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), at(1100ms, [this] {
                 for (size_t e = 0; e < 3; ++e) etcd_.setEndpoint(e, SimEtcd::Endpoint::kDown);
               })});
  EXPECT_EQ(heard_["alpha"].at_ms, 7500);
  EXPECT_EQ(heard_["alpha"].event.kind, LinkEvent::Kind::kRemoteFailure);
  EXPECT_EQ(heard_["alpha"].event.failure.machine_rank, 0);
  EXPECT_EQ(heard_["alpha"].event.failure.reason.rfind(
                "etcd was not reached for 6 s (the keep-alive window, 1 s, and 5 s for etcd to "
                "elect a leader): ",
                0),
            0u)
      << heard_["alpha"].event.failure.reason;
  EXPECT_FALSE(decided_["alpha"].restart);
}

// etcd's first endpoint goes silent at 0.5 s (its machine cut off: no answer, no error), where
// every agent's client, lease and watches were. Each leaves it for the next endpoint — the
// renewals keep landing, the watches are opened again elsewhere — so no one is lost for it, and a
// real loss later is seen at the instant its lease ends: gamma dies at 1.05 s, heard at 2.02 s.
TEST_F(EtcdGroupTest, ASilentEndpointIsLeftAndALossIsStillSeenOnTime) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"),
               at(500ms, [this] { etcd_.setEndpoint(0, SimEtcd::Endpoint::kSilent); }),
               at(1050ms, [this] { kill("gamma"); })});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].at_ms, 2020) << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 2) << n;
    EXPECT_EQ(heard_[n].event.failure.reason,
              "lost: its lease expired (no keep-alive reached etcd for 1 s)")
        << n;
  }
}

// No blind retry on etcd, where every agent decides from what etcd holds: gamma's rank 4 fails at
// 2 s (exit 1, a missing module): everyone hears it then and decides one counted restart there,
// and round 1 forms at once. In round 1 beta's rank 2 — another machine, another rank — fails
// the same way at 3 s before any step: every agent decides, at 3.000 s, not to restart, naming
// both attempts.
TEST_F(EtcdGroupTest, TheSameFailureOnAnotherMachineIsNotRetried) {
  const std::string line = "ModuleNotFoundError: No module named 'missing'";
  threeMeet();
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({failsAndEnds("gamma", 2000ms, 1, line), meets("gamma", false)})});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(decided_ms_[n], 2000) << n;
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(decided_[n].restart_count, 1) << n;
    EXPECT_EQ(met_ms_[n], 2000) << n;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;
  }
  EXPECT_EQ(heard_["gamma"].event.kind, LinkEvent::Kind::kPublishedFirst);
  EXPECT_EQ(heard_["alpha"].event.failure.rank, 4);

  world_->run(
      {hearsAndEnds("alpha"), failsAndEnds("beta", 3000ms, 1, line), hearsAndEnds("gamma")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(decided_ms_[n], 3000) << n;
    EXPECT_FALSE(decided_[n].restart) << n;
    EXPECT_EQ(decided_[n].why, decided_["alpha"].why) << n;
  }
  const std::string why = decided_["alpha"].why;
  EXPECT_NE(why.find("attempts 0 and 1 failed the same way before any rank completed a step"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(", as rank 4 did; last stderr line: " + line), std::string::npos) << why;
}

// --max_restarts 1: round 0's failure (alpha, exit 1) is restarted, 1 of 1; round 1's (gamma,
// exit 2: another failure) finds the budget spent, and every agent hears so at that instant.
TEST_F(EtcdGroupTest, ASpentBudgetStopsEveryMachineWithOneCount) {
  plan_.max_restarts = 1;
  threeMeet();
  world_->run({then({failsAndEnds("alpha", 1000ms, 1, "first"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({hearsAndEnds("gamma"), meets("gamma", false)})});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(decided_ms_[n], 1000) << n;
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_NE(decided_[n].why.find("(1 of 1 restarts"), std::string::npos) << decided_[n].why;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;
  }
  world_->run(
      {hearsAndEnds("alpha"), hearsAndEnds("beta"), failsAndEnds("gamma", 5000ms, 2, "second")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(decided_ms_[n], 5000) << n;
    EXPECT_FALSE(decided_[n].restart) << n;
    EXPECT_NE(decided_[n].why.find("the job's 1 restart is spent"), std::string::npos)
        << decided_[n].why;
    EXPECT_EQ(heard_[n].event.failure.exit_code, 2) << n;
  }
}

// Ctrl-C or SIGTERM while the agent waits in a later round: alpha waits in round 1 for a machine
// that never comes (MIN 2, --rdzv_timeout 900 s); interrupted at 2 s, its meet() returns an error
// at that instant — not at a timeout, and not a placement.
TEST_F(EtcdGroupTest, AnInterruptEndsTheMeetingOfALaterRoundAtOnce) {
  agent("alpha", 29500), agent("beta", 29501);
  world_->run({meets("alpha", true), meets("beta", true, 10ms)});
  const std::string error = interruptedWhileMeeting("alpha", 2000ms);
  EXPECT_NE(error.find("interrupted"), std::string::npos) << error;
}

}  // namespace
}  // namespace accel::launcher
