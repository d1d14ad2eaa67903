// Whole EtcdGroups — connect (the lease and its thread), meet on etcd, the round's link and its
// thread, a round's end decided by every agent, meeting again — as agents of one job over a
// simulated etcd cluster in simulated time (sim_etcd.h, sim_agents.h): the exact instant of
// everything every agent does and is told, where etcd's leases, elections and endpoints decide
// it. The same pieces against a real etcd: etcd_round_test.cc, etcd_lease_test.cc,
// etcd_link_test.cc, and e2e netns_elastic.sh's etcd cases.

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "launcher/rendezvous/etcd/rounds.h"
#include "launcher/rendezvous/round/keys.h"
#include "launcher/rendezvous/store_host.h"
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

  // Agent `name`, whose own store (machine 0's serves the workers) is at `port`; `store`, its
  // host's view (nullptr: none to look at).
  RoundGroup& agent(const std::string& name, int port, StoreHost* store = nullptr) {
    auto process = std::make_shared<SimProcess>();
    processes_[name] = process;
    auto made = makeEtcdGroup(plan_, env_, notifier(name), etcd_.options(), "", port, store,
                              etcd_.access(process));
    RoundGroup& g = *made;
    groups_[name] = std::move(made);
    return g;
  }
  Expected<void> connect(const std::string& name) override {
    return static_cast<RoundGroup&>(group(name)).connect();
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

  // etcd has no leader from `from` to `to`: whether any of alpha's, beta's and gamma's links
  // heard anything by `until`.
  bool anyHeardWhileLeaderless(std::chrono::milliseconds from, std::chrono::milliseconds to,
                               std::chrono::milliseconds until) {
    std::atomic<bool> anyHeard{false};
    auto quiet = [&](const std::string& n) {
      return [&, n] {
        if (world_->awaitReadable(group(n).link()->fd(), SimWorld::at(until))) anyHeard = true;
      };
    };
    world_->run({quiet("alpha"), quiet("beta"), quiet("gamma"),
                 at(from, [this] { etcd_.loseLeader(); }),
                 at(to, [this] { etcd_.electLeader(); })});
    return anyHeard;
  }

  SimEtcd etcd_{world_, 3};
  std::map<std::string, std::shared_ptr<SimProcess>> processes_;
};

// An agent's own store, as far as clearing it between rounds goes: each clear notes the instant
// and whether round 1's record was on etcd by then (its members' workers may write to machine 0's
// store from that instant on).
class ClearedStore : public StoreHost {
 public:
  ClearedStore(SimWorld& world, const SimEtcd& etcd) : world_(world), etcd_(etcd) {}
  bool waiting(const std::string&, std::chrono::milliseconds) const override { return true; }
  size_t presentCount() const override { return 0; }
  bool awaitPresentAtMost(size_t, std::chrono::milliseconds) const override { return true; }
  bool awaitWatches(size_t, std::chrono::milliseconds) const override { return true; }
  int64_t keepAlives(const std::string&) const override { return 0; }
  size_t clearKeysExcept(const std::vector<std::string>&) override {
    const std::string record = JobKeys("sim").round(1).record();
    const auto keys = etcd_.keysUnder(record);  // the head's key is under it too
    const bool closed = std::find(keys.begin(), keys.end(), record) != keys.end();
    cleared.push_back(std::to_string(world_.nowMs()) + " ms" +
                      (closed ? ", round 1 closed" : ", before round 1 closed"));
    return 0;
  }
  std::vector<std::string> cleared;

 private:
  SimWorld& world_;
  const SimEtcd& etcd_;
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
              "lost: its lease ended (no keep-alive reached etcd for 1 s, or etcd revoked it)")
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
// it decides, alone, to join again as a newcomer (not a restart: the others re-formed without
// it; MembershipTest.ADroppedMachineComesBackAsANewcomer follows it back into the group).
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
  EXPECT_TRUE(decided_["gamma"].restart) << decided_["gamma"].why;
  EXPECT_FALSE(decided_["gamma"].counted);
  EXPECT_NE(decided_["gamma"].why.find("it joins the job again as a newcomer"), std::string::npos)
      << decided_["gamma"].why;
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
// no agent calls its own lease lost (only etcd's word ends it) and no machine is dropped: at 10 s
// every link is silent and every registration there.
TEST_F(EtcdGroupTest, ALeaderElectionLongerThanTheWindowCostsNoMachine) {
  threeMeet();
  EXPECT_FALSE(anyHeardWhileLeaderless(1100ms, 4100ms, 10s));
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(group(n).link()->takeEvents().empty()) << n;
  }
  EXPECT_EQ(etcd_.keysUnder(JobKeys("sim").round(0).memberPrefix()).size(), 3u);
}

// etcd loses its quorum for 60 s (no leader from 1.1 s to 61.1 s) while the workers train: no
// renewal lands and no lease ends meanwhile, and the new leader gives every lease its TTL again.
// Nothing stops: no link hears anything, every registration is there at 70 s, and each agent
// says once that etcd is out of reach and once that it answers again.
TEST_F(EtcdGroupTest, EtcdOutOfReachForAMinuteCostsNoMachineAndIsSaidOnce) {
  threeMeet();
  EXPECT_FALSE(anyHeardWhileLeaderless(1100ms, 61100ms, 70s));
  EXPECT_EQ(etcd_.keysUnder(JobKeys("sim").round(0).memberPrefix()).size(), 3u);
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    int out = 0, back = 0;
    for (const auto& line : said_[n]) {
      out += line.find("etcd is out of reach (no keep-alive landed for 1 s") != std::string::npos;
      back += line.find("etcd answers again after 6") != std::string::npos;
    }
    EXPECT_EQ(out, 1) << n << ":\n" << saidText(n);
    EXPECT_EQ(back, 1) << n << ":\n" << saidText(n);
  }
}

// etcd's first endpoint goes silent at 0.505 s (its machine cut off: no answer, no error), where
// some agents' clients, leases and watches were (each starts at an endpoint of its own). Each
// leaves it for the next endpoint — a renewal within the same call, after that endpoint's share of
// it; the watches are opened again elsewhere — so no one is lost for it, and a real loss later is
// seen at the instant its lease ends: gamma dies at 1.05 s, its last renewal landed at most an
// interval (250 ms) before, so its lease ends within a window (1 s) of its death, and both
// survivors hear it at that instant. A link whose check found its endpoint silent reads the round
// again elsewhere at once, not after one more attempt at the silent one: the link whose agent's
// renewal got through there just before the silence checks one interval later than the others, and
// heard the loss 150 ms late when its read went to the silent endpoint first (in about one run of
// ten: which endpoint an agent starts at comes from its random token). (The silence is not at
// 0.5 s, where renewals and checks fall too: which of two things at one instant comes first is the
// threads' order.)
TEST_F(EtcdGroupTest, ASilentEndpointIsLeftAndALossIsStillSeenOnTime) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"),
               at(505ms, [this] { etcd_.setEndpoint(0, SimEtcd::Endpoint::kSilent); }),
               at(1050ms, [this] { kill("gamma"); })});
  const int64_t ended = etcd_.leaseEndedMs(*processes_.at("gamma"));
  EXPECT_GE(ended, 1800);
  EXPECT_LE(ended, 2050);
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].at_ms, ended) << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 2) << n;
    EXPECT_EQ(heard_[n].event.failure.reason,
              "lost: its lease ended (no keep-alive reached etcd for 1 s, or etcd revoked it)")
        << n;
  }
}

// Every agent clears its own store's worker keys before it registers for the next round — not
// once the round closed, when the other members' workers may already write to machine 0's store.
// gamma fails at 1 s; all three decide a restart then and meet again in round 1: each cleared its
// store once, at 1 s, before round 1's record was made.
TEST_F(EtcdGroupTest, EveryAgentClearsItsStoreBeforeItRegistersForTheNextRound) {
  std::map<std::string, std::unique_ptr<ClearedStore>> stores;
  int port = 29500;
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    stores[n] = std::make_unique<ClearedStore>(*world_, etcd_);
    agent(n, port++, stores[n].get());
  }
  world_->run({meets("alpha", true), meets("beta", true, 10ms), meets("gamma", true, 20ms)});
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({failsAndEnds("gamma", 1000ms, 1, "boom"), meets("gamma", false)})});
  expectMet({"alpha", "beta", "gamma"}, 1000, 1, 6, 1);
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(stores[n]->cleared, (std::vector<std::string>{"1000 ms, before round 1 closed"}))
        << n;
  }
}

// The full group stops (gamma's workers fail at 2 s) while delta and epsilon wait in round 1 as
// spares (MIN is 2: they could close it alone). They do not take the round: its members decide
// (one counted restart, expecting the three of them and the two waiting, at most three) and
// re-form there at 2 s — alpha, beta, gamma keep their places — and the spares wait on.
TEST_F(EtcdGroupTest, SparesLeaveARoundToTheMembersWhoStoppedAndReForm) {
  threeMeet();
  agent("delta", 29503), agent("epsilon", 29504);
  std::map<std::string, std::string> met;  // guarded by mutex_
  auto spare = [&](const std::string& n) {
    return at(500ms, [&, n] {
      ASSERT_TRUE(connect(n).ok()) << n;
      auto p = group(n).meet();
      std::lock_guard lock(mutex_);
      met[n] = p.ok() ? "placed as machine " + std::to_string(p->machine_rank) : p.error();
    });
  };
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({failsAndEnds("gamma", 2000ms, 1, "boom"), meets("gamma", false)}),
               spare("delta"), spare("epsilon"), at(10s, [this] {
                 group("delta").interrupt();
                 group("epsilon").interrupt();
               })});
  expectMet({"alpha", "beta", "gamma"}, 2000, 1, 6, 1);
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_EQ(placed_["gamma"].machine_rank, 2);
  for (const std::string n : {"delta", "epsilon"}) {
    EXPECT_EQ(met[n], "round 2: interrupted while it formed") << n;
  }
}

// --nnodes 2:4: alpha and beta register at 0 and 10 ms; gamma registers at 11 ms and its agent
// dies at 12 ms; delta arrives at 20 ms, and the round closes at MAX with all four — etcd cannot
// tell gamma's registration from a living one until its lease ends (1.011 s). Then every link
// sees that gamma never took its place: the group re-forms without it, as for a machine joining
// — no failure, no restart counted (--max_restarts 0 would otherwise end the job with three
// healthy machines present) — as three, delta after the two before it.
TEST_F(EtcdGroupTest, AJoinerThatDiedBeforeTheRoundStartedCostsNoRestart) {
  plan_.max_restarts = 0;
  plan_.num_machines = 4;
  plan_.world_size = 8;
  agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502), agent("delta", 29503);
  world_->run({then({meets("alpha", true), hearsAndEnds("alpha"), meets("alpha", false)}),
               then({meets("beta", true, 10ms), hearsAndEnds("beta"), meets("beta", false)}),
               at(11ms,
                  [this] {
                    ASSERT_TRUE(connect("gamma").ok());
                    EXPECT_FALSE(group("gamma").meet().ok());  // its agent dies meanwhile
                  }),
               at(12ms, [this] { kill("gamma"); }),
               then({meets("delta", true, 20ms), hearsAndEnds("delta"), meets("delta", false)})});
  for (const std::string n : {"alpha", "beta", "delta"}) {
    EXPECT_EQ(heard_[n].at_ms, 1011) << n;
    EXPECT_EQ(heard_[n].event.kind, LinkEvent::Kind::kGroupGrows) << n;
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_FALSE(decided_[n].counted) << n;
    EXPECT_EQ(decided_[n].restart_count, 0) << n;
    EXPECT_NE(decided_[n].why.find("machine 2 ("), std::string::npos) << decided_[n].why;
  }
  // They meet again as soon as every member's end is known: at once, or at the round end's next
  // look at the lost machines (100 ms) when gamma's loss reached a link a moment after the stop.
  expectMet({"alpha", "beta", "delta"}, decided_ms_["alpha"], 1, 6, 0);
  EXPECT_LE(decided_ms_["alpha"], 1111);
  EXPECT_EQ(placed_["delta"].machine_rank, 2);
}

// A job that finished leaves no key behind on etcd, and the same command run again with the same
// --rdzv_id is a new job — round 0, restart count 0 — not one that "ended before this machine
// could join it".
TEST_F(EtcdGroupTest, AFinishedJobLeavesNoKeyAndItsIdStartsANewJob) {
  threeMeet();
  auto finishes = [this](const std::string& n, std::chrono::milliseconds t) {
    return at(t, [this, n] {
      group(n).stopLink();
      group(n).closeJob("the job finished");
      group(n).awaitOtherMachines();
      groups_.at(n).reset();  // its process ends: its lease is revoked
    });
  };
  world_->run({finishes("alpha", 1000ms), finishes("beta", 1200ms), finishes("gamma", 1300ms)});
  EXPECT_EQ(etcd_.keysUnder("accel/rdzv/sim/"), std::vector<std::string>{});

  agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502);
  world_->run(
      {meets("alpha", true, 2000ms), meets("beta", true, 2010ms), meets("gamma", true, 2020ms)});
  expectMet({"alpha", "beta", "gamma"}, 2020, 0, 6, 0);
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
