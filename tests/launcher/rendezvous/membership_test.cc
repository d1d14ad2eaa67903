// The membership rules of a job's rounds, each written once and run against both backends (the
// test names end in /Store and /Etcd): whole groups — StoreGroups over the master's store
// (sim_group_store.h), EtcdGroups over a 3-member etcd (sim_etcd.h) — as the agents of one job in
// simulated time (sim_agents.h). What a rule decides is asserted the same way on both: who is
// lost, what every survivor decides, who meets again with what ranks and restart count. Where the
// backends differ by design (the store's host is the job's one point of failure; etcd tells a
// dead registration from a living one only when its lease ends), the test says so and asserts
// each. The exact instants of each backend are store_group_test.cc's and etcd_group_test.cc's.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/rendezvous/c10d/store_rounds.h"
#include "launcher/rendezvous/etcd/rounds.h"
#include "launcher/rendezvous/round/keys.h"
#include "sim_agents.h"
#include "sim_etcd.h"
#include "sim_group_store.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using testing::SimEtcd;
using testing::SimGroupStore;
using testing::SimProcess;
using testing::SimStoreHost;
using testing::SimWorld;

enum class Backend { kStore, kEtcd };

std::string backendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kStore ? "Store" : "Etcd";
}

// A job of 2 to 3 machines, 2 ranks each, keep-alives every 250 ms, 4 of them the window (1 s),
// a last call of 300 ms (SimAgents). On the store alpha is the master (it hosts the store).
class MembershipTest : public testing::SimAgents, public ::testing::WithParamInterface<Backend> {
 protected:
  MembershipTest() {
    plan_.local_addr = "127.0.0.1";
    if (etcd()) etcd_ = std::make_unique<SimEtcd>(world_, 3);
  }
  ~MembershipTest() override {
    for (auto& [name, group] : groups_) {
      if (group) group->stopLink();
    }
    if (etcd_) {
      for (auto& [name, process] : processes_) etcd_->kill(*process);
    }
    groups_.clear();  // before the store or etcd they reach
  }

  bool etcd() const { return GetParam() == Backend::kEtcd; }

  // Agent `name` (its own store, machine 0's for the workers on etcd, on `port`).
  MachineGroup& agent(const std::string& name, int port) {
    if (etcd()) {
      auto process = std::make_shared<SimProcess>();
      processes_[name] = process;
      groups_[name] = makeEtcdGroup(plan_, env_, notifier(name), etcd_->options(), "", port,
                                    nullptr, etcd_->access(process));
    } else {
      const bool master = name == "alpha";
      auto store = std::make_unique<SimGroupStore>(host_, master);
      stores_[name] = store.get();
      groups_[name] =
          makeStoreGroup(plan_, env_, notifier(name), master ? std::optional<int>(0) : std::nullopt,
                         port, std::move(store), world_);
    }
    return *groups_[name];
  }
  Expected<void> connect(const std::string& name) override {
    return static_cast<RoundGroup&>(group(name)).connect();
  }
  // The agent's process dies (its connections close; on etcd its lease is renewed no more).
  void kill(const std::string& name) {
    if (etcd()) return etcd_->kill(*processes_.at(name));
    stores_.at(name)->kill();
  }
  // The agent's process stops (SIGSTOP) or goes on.
  void freeze(const std::string& name, bool frozen) {
    if (etcd()) return etcd_->freeze(*processes_.at(name), frozen);
    stores_.at(name)->freeze(frozen);
  }
  // The agent's machine is cut off from the others (a partition: from the store's machine, or
  // from every etcd member), or reaches them again.
  void cutOff(const std::string& name, bool cut) {
    if (etcd()) return etcd_->cutOff(*processes_.at(name), cut);
    stores_.at(name)->cutOff(cut);
  }

  // alpha, beta and gamma arrive at 0, 10 and 20 ms and meet at 20 ms (MAX): machines 0, 1, 2.
  void threeMeet() {
    agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502);
    world_->run({meets("alpha", true), meets("beta", true, 10ms), meets("gamma", true, 20ms)});
    int rank = 0;
    for (const std::string n : {"alpha", "beta", "gamma"}) {
      EXPECT_EQ(placed_[n].machine_rank, rank++) << n;
      EXPECT_EQ(placed_[n].world_size, 6) << n;
    }
  }
  // alpha and beta arrive at 0 and 10 ms: MIN, so they meet at the last call's end (310 ms).
  void twoMeet() {
    agent("alpha", 29500), agent("beta", 29501);
    world_->run({meets("alpha", true), meets("beta", true, 10ms)});
  }

  // A body: `name` takes part in every round's end and meets again until it met a group of
  // `machines` machines at `from` or later (at most `rounds` rounds). counted_ is set when one of
  // its decisions counts a restart.
  std::function<void()> followsUntil(const std::string& name, int machines,
                                     std::chrono::milliseconds from, int rounds = 4) {
    return [this, name, machines, from, rounds] {
      auto done = [&] {
        std::lock_guard lock(mutex_);
        return placed_[name].num_machines == machines && met_ms_[name] >= from.count();
      };
      for (int r = 0; r < rounds && !done(); ++r) {
        hearsAndEnds(name)();
        if (decided_[name].counted && decided_[name].restart) counted_ = true;
        ASSERT_TRUE(decided_[name].restart) << name << ": " << decided_[name].why;
        meets(name, false)();
      }
    };
  }
  // A body: `name` connects at `t` and meets; records what meet() said (a placement or why not).
  std::function<void()> tries(const std::string& name, std::chrono::milliseconds t) {
    return at(t, [this, name] {
      ASSERT_TRUE(connect(name).ok()) << name;
      auto p = group(name).meet();
      std::lock_guard lock(mutex_);
      tried_[name] = p.ok() ? "machine " + std::to_string(p->machine_rank) : p.error();
      if (p.ok()) placed_[name] = *p;
    });
  }

  SimStoreHost host_{*world_, "sim"};
  std::map<std::string, SimGroupStore*> stores_;
  std::unique_ptr<SimEtcd> etcd_;
  std::map<std::string, std::shared_ptr<SimProcess>> processes_;
  std::map<std::string, std::string> tried_;  // guarded by mutex_
  std::atomic<bool> counted_{false};
};

INSTANTIATE_TEST_SUITE_P(Backends, MembershipTest,
                         ::testing::Values(Backend::kStore, Backend::kEtcd), backendName);

// A member whose agent dies is found lost (on the store at the master's next look at its
// presence; on etcd when its lease ends, at most a window after its death); both survivors hear
// it at one instant, decide one counted restart for a group of two, and meet again in their
// order.
TEST_P(MembershipTest, ALostMemberIsDroppedAndTheRestMeetAgainCountedOnce) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"), at(1050ms, [this] { kill("gamma"); })});
  expectRestart({"alpha", "beta"}, heard_["alpha"].at_ms, LinkEvent::Kind::kRemoteFailure,
                /*counted=*/true, 1);
  EXPECT_GT(heard_["alpha"].at_ms, 1050);
  EXPECT_LE(heard_["alpha"].at_ms, 1050 + 1000);
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 2) << n;
    EXPECT_EQ(heard_[n].event.failure.cause, kCauseLost) << n;
    EXPECT_EQ(decided_[n].expect_machines, 2) << n;
  }
  ASSERT_EQ(group("alpha").link()->lostMachines().size(), 1u);
  EXPECT_EQ(group("alpha").link()->lostMachines()[0].machine, 2);
  world_->run({meets("alpha", false), meets("beta", false)});
  expectMet({"alpha", "beta"}, heard_["alpha"].at_ms, 1, 4, 1);
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
}

// A member that goes silent (SIGSTOP: its connections stay open) is lost once a keep-alive window
// (1 s) passed without a sign of it — not before, and not much after.
TEST_P(MembershipTest, ASilentMemberIsLostAfterTheKeepAliveWindow) {
  threeMeet();
  world_->run(
      {hearsAndEnds("alpha"), hearsAndEnds("beta"), at(800ms, [this] { freeze("gamma", true); })});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_GE(heard_[n].at_ms, 800 + 1000 - 250) << n;  // its last sign: at most 250 ms before
    EXPECT_LE(heard_[n].at_ms, 800 + 1000 + 100) << n;
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 2) << n;
    EXPECT_TRUE(decided_[n].restart) << n;
    EXPECT_EQ(decided_[n].restart_count, 1) << n;
  }
  freeze("gamma", false);
}

// A machine dropped for silence comes back as a newcomer when it can reach the others again:
// gamma is frozen (SIGSTOP) from 0.8 s to 3 s; the others drop it after the window and go on as
// two (one counted restart); when gamma thaws it hears it was dropped, stops its workers, and
// joins again — the group, which has room, re-forms as three with gamma last, uncounted.
TEST_P(MembershipTest, ADroppedMachineComesBackAsANewcomer) {
  threeMeet();
  world_->run({followsUntil("alpha", 3, 3000ms), followsUntil("beta", 3, 3000ms),
               then({hearsAndEnds("gamma"), meets("gamma", false)}),
               at(800ms, [this] { freeze("gamma", true); }),
               at(3000ms, [this] { freeze("gamma", false); })});
  EXPECT_TRUE(decided_["gamma"].restart) << decided_["gamma"].why;
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(placed_[n].world_size, 6) << n;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;  // the loss, counted once
    EXPECT_GE(met_ms_[n], 3000) << n;
  }
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_EQ(placed_["gamma"].machine_rank, 2);
}

// A machine cut off longer than its connections last comes back as a newcomer when the partition
// ends: gamma is cut off from 0.8 s to 8 s (past the window, 1 s, and past the 5 s its failure
// watch's TCP keep-alives allow on the store). The others drop it and go on as two (one counted
// restart). Once it reaches the others again it joins as a newcomer and the group, which has
// room, re-forms as three with gamma last, uncounted. Where the backends differ by design: on the
// store gamma stops its workers when its watch fails (its knock at the store gets no answer) and
// keeps knocking; on etcd it cannot tell a partition from etcd out of reach (no quorum: no lease
// ends), so its workers go on until it reaches etcd and learns its lease ended.
TEST_P(MembershipTest, AMachineCutOffComesBackAsANewcomerWhenThePartitionEnds) {
  threeMeet();
  world_->run({followsUntil("alpha", 3, 8000ms), followsUntil("beta", 3, 8000ms),
               then({hearsAndEnds("gamma"), meets("gamma", false)}),
               at(800ms, [this] { cutOff("gamma", true); }),
               at(8000ms, [this] { cutOff("gamma", false); })});
  EXPECT_TRUE(decided_["gamma"].restart) << decided_["gamma"].why;
  EXPECT_FALSE(decided_["gamma"].counted) << decided_["gamma"].why;
  if (etcd()) {
    EXPECT_GE(decided_ms_["gamma"], 8000);
  } else {
    EXPECT_GE(decided_ms_["gamma"], 800 + 5000);               // when its failure watch failed
    EXPECT_LT(decided_ms_["gamma"], 800 + 5000 + 1000 + 500);  // and a knock got no answer
  }
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(placed_[n].world_size, 6) << n;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;  // the loss, counted once
    EXPECT_GE(met_ms_[n], 8000) << n;
    EXPECT_LE(met_ms_[n], 8000 + 2000) << n;
  }
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_EQ(placed_["gamma"].machine_rank, 2);
}

// A member silent for less than the keep-alive window (frozen from 0.8 s to 1.3 s, the window
// 1 s) is lost by no one: at 5 s no link has heard anything.
TEST_P(MembershipTest, APauseShorterThanTheWindowCostsNothing) {
  threeMeet();
  std::atomic<bool> anyHeard{false};
  auto quiet = [&](const std::string& n) {
    return [&, n] {
      if (world_->awaitReadable(group(n).link()->fd(), SimWorld::at(5s))) anyHeard = true;
    };
  };
  world_->run({quiet("alpha"), quiet("beta"), quiet("gamma"),
               at(800ms, [this] { freeze("gamma", true); }),
               at(1300ms, [this] { freeze("gamma", false); })});
  EXPECT_FALSE(anyHeard);
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(group(n).link()->lostMachines().empty()) << n;
  }
}

// A member killed in the exit barrier (gamma at 0.81 s, before it said its workers finished;
// beta left at 0.5 s): machine 0 does not wait for it the barrier's whole bound, but stops its
// store once gamma is gone (the store: its presence, at the next look; etcd: its lease's end, a
// window later) and says how many reported.
TEST_P(MembershipTest, AMemberKilledInTheExitBarrierIsNotWaitedFor) {
  threeMeet();
  std::atomic<int64_t> passedMs{-1};
  world_->run({[&] {
                 group("alpha").stopLink();
                 group("alpha").awaitOtherMachines();
                 passedMs = world_->nowMs();
               },
               at(500ms,
                  [&] {
                    group("beta").stopLink();
                    group("beta").awaitOtherMachines();
                    groups_.at("beta").reset();
                  }),
               at(810ms, [&] { kill("gamma"); })});
  EXPECT_GE(passedMs, 810);
  EXPECT_LE(passedMs, etcd() ? 810 + 1000 + 100 : 810 + 40);
  bool said = false;
  for (const auto& line : said_["alpha"]) {
    said |= line.find(
                "stopping the job's store although only 2/3 machines reported their "
                "workers finished") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

// The exit barrier: machine 0, whose store serves the workers, passes it only once every member
// said its workers finished (beta at 0.5 s, gamma at 0.81 s), within its 20 ms look — and says
// nothing of stopping its store early.
TEST_P(MembershipTest, TheExitBarrierWaitsForEveryMember) {
  threeMeet();
  std::vector<std::string> order;  // guarded by mutex_
  auto note = [&](const std::string& what) {
    std::lock_guard lock(mutex_);
    order.push_back(what);
  };
  std::atomic<int64_t> passedMs{-1};
  auto leaves = [&](const std::string& n) {
    group(n).stopLink();
    group(n).awaitOtherMachines();
    note(n + " left");
    groups_.at(n).reset();  // its process ends
  };
  world_->run({[&] {
                 group("alpha").stopLink();
                 group("alpha").awaitOtherMachines();
                 passedMs = world_->nowMs();
                 note("alpha passed the barrier");
               },
               at(500ms, [&] { leaves("beta"); }), at(810ms, [&] { leaves("gamma"); })});
  EXPECT_EQ(order,
            (std::vector<std::string>{"beta left", "gamma left", "alpha passed the barrier"}));
  EXPECT_GE(passedMs, 810);
  EXPECT_LE(passedMs, 830);
  for (const auto& line : said_["alpha"]) {
    EXPECT_EQ(line.find("although only"), std::string::npos) << line;
  }
}

// The exit barrier after a failure lasts its bound: gamma's agent lives on but never reports its
// workers finished; machine 0 (alpha) waits exit_after_failure (2 s) from its arrival at the
// barrier, then stops the job's store and says so — in the same words on both backends.
TEST_P(MembershipTest, TheExitBarrierAfterAFailureLastsItsBoundAndSaysSo) {
  plan_.max_restarts = 0;
  plan_.min_machines = 3;
  plan_.round_timeouts.exit_after_failure = 2s;
  threeMeet();
  std::atomic<int64_t> arrivedMs{-1}, passedMs{-1};
  auto leaves = [this](const std::string& n) {
    return [this, n] {
      group(n).stopLink();
      group(n).awaitOtherMachines();
    };
  };
  world_->run({then({hearsAndEnds("alpha"),
                     [&] {
                       arrivedMs = world_->nowMs();
                       leaves("alpha")();
                       passedMs = world_->nowMs();
                     }}),
               then({failsAndEnds("beta", 1000ms, 3, "RuntimeError: boom"), leaves("beta")}),
               hearsAndEnds("gamma")});
  EXPECT_GE(passedMs - arrivedMs, 2000);
  EXPECT_LE(passedMs - arrivedMs, 2100);
  bool said = false;
  for (const auto& line : said_["alpha"]) {
    said = said || line.find(
                       "stopping the job's store although only 2/3 machines reported their "
                       "workers finished") != std::string::npos;
  }
  EXPECT_TRUE(said) << saidText("alpha");
}

// A value that is not a number where the agents keep the round opened last (another program
// writes under the job's keys): an arriving agent's connect fails naming the key and the value —
// no std::invalid_argument ending it, no "cannot reach".
TEST_P(MembershipTest, AMalformedValueIsAnErrorNamingKeyAndValue) {
  twoMeet();
  agent("delta", 29503);
  std::optional<Expected<void>> refused;
  world_->run({[&] {
    const std::string key = JobKeys("sim").openRound();
    if (etcd()) {
      etcd_->access(std::make_shared<SimProcess>()).connect(etcd_->options())->put(key, "twelve");
    } else {
      std::lock_guard lock(world_->mutex());
      host_.data().set(key, "twelve");
    }
    refused.emplace(connect("delta"));
  }});
  ASSERT_TRUE(refused.has_value());
  ASSERT_FALSE(refused->ok());
  EXPECT_NE(refused->error().find("the key '" + JobKeys("sim").openRound() +
                                  "' holds 'twelve', not a number"),
            std::string::npos)
      << refused->error();
  EXPECT_EQ(refused->error().find("cannot reach"), std::string::npos) << refused->error();
}

// Fewer than MIN within the join timeout (--rdzv_timeout 2 s, alpha alone of MIN 2): meet()
// fails at the timeout (the store's other agents wait 2 s more for the master's word; alpha is
// the master there), naming how many joined.
TEST_P(MembershipTest, TheJoinTimeoutNamesHowManyJoined) {
  plan_.round_timeouts.join = 2s;
  agent("alpha", 29500);
  std::optional<Expected<Placement>> met;
  int64_t metMs = -1;
  world_->run({[&] {
    ASSERT_TRUE(connect("alpha").ok());
    met.emplace(group("alpha").meet());
    metMs = world_->nowMs();
  }});
  ASSERT_TRUE(met.has_value());
  ASSERT_FALSE(met->ok());
  EXPECT_GE(metMs, 2000);
  EXPECT_LE(metMs, 2000 + 1000);
  EXPECT_NE(met->error().find("1"), std::string::npos) << met->error();
  EXPECT_NE(met->error().find("joined"), std::string::npos) << met->error();
}

// A spare that dies while it waits is not waited for: delta waits beside a full group from 0.5 s
// and dies at 1 s; gamma dies at 2 s. When the survivors decide, delta's registration is gone (on
// etcd once its lease ended), so the next round expects two and forms at that instant, as two.
TEST_P(MembershipTest, ASpareThatDiesIsNotWaitedFor) {
  threeMeet();
  agent("delta", 29503);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), tries("delta", 500ms),
               at(1000ms, [this] { kill("delta"); }), at(2000ms, [this] { kill("gamma"); })});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(decided_[n].expect_machines, 2) << n;
    EXPECT_EQ(met_ms_[n], decided_ms_[n]) << n << ": the round waited";
    EXPECT_EQ(placed_[n].world_size, 4) << n;
  }
  EXPECT_NE(tried_["delta"].rfind("machine ", 0), 0u) << "delta, dead, was placed";
}

// An agent of another --rdzv_id never joins this job: on the store it is refused, naming both
// jobs; on etcd it meets in a job of its own (alone, below MIN, until interrupted). Either way
// this job's members hear nothing of it.
TEST_P(MembershipTest, AnotherJobIdIsKeptApart) {
  twoMeet();
  LaunchPlan mine = plan_;
  plan_.rendezvous_id = "other";
  agent("intruder", 29509);
  plan_ = mine;
  world_->run({at(1000ms, [this] {
    auto connected = connect("intruder");
    std::lock_guard lock(mutex_);
    tried_["intruder"] = connected.ok() ? "connected" : connected.error();
  })});
  if (etcd()) {
    EXPECT_EQ(tried_["intruder"], "connected");
    world_->run({[this] {  // it meets its own job's round 0, alone below MIN, until interrupted
                   auto p = group("intruder").meet();
                   std::lock_guard lock(mutex_);
                   tried_["intruder"] = p.ok() ? "placed" : p.error();
                 },
                 at(5000ms, [this] { group("intruder").interrupt(); })});
    EXPECT_EQ(tried_["intruder"], "round 0: interrupted while it formed");
  } else {
    EXPECT_NE(tried_["intruder"].find("serves job 'sim'"), std::string::npos) << tried_["intruder"];
    EXPECT_NE(tried_["intruder"].find("this machine's job is 'other'"), std::string::npos);
  }
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_TRUE(group(n).link()->takeEvents().empty()) << n;
  }
}

// MIN machines close the round when the last call (300 ms) after the MIN-th ends.
TEST_P(MembershipTest, MinMachinesCloseTheRoundAtTheLastCall) {
  twoMeet();
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(met_ms_[n], 310) << n;
    EXPECT_EQ(placed_[n].world_size, 4) << n;
    EXPECT_EQ(placed_[n].restart_count, 0) << n;
  }
}

// A machine arriving while the group has room re-forms it without counting a restart; the
// members keep their places and the newcomer follows.
TEST_P(MembershipTest, AnArrivalGrowsTheGroupWithoutARestart) {
  twoMeet();
  agent("delta", 29503);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), meets("delta", true, 1000ms)});
  expectRestart({"alpha", "beta"}, heard_["alpha"].at_ms, LinkEvent::Kind::kGroupGrows,
                /*counted=*/false, 0);
  expectMet({"alpha", "beta", "delta"}, met_ms_["delta"], 1, 6, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
  EXPECT_EQ(placed_["delta"].machine_rank, 2);
}

// --straggler_action exclude: the agent that scores the ranks asks its link to exclude gamma's
// machine (on the master's store machine 0 cannot be: it hosts the rendezvous). Every machine
// hears it at one instant; gamma, told it is the one, leaves (its end says why, and its decision
// is to go); alpha and beta re-form as two without it, uncounted, and meet again.
TEST_P(MembershipTest, AnExcludedStragglersMachineLeavesAndTheRestReformUncounted) {
  threeMeet();
  const std::string why =
      "machine 2 is excluded as a straggler's (rank 4, score 0.30): the group "
      "re-forms without it";
  world_->run({at(1000ms,
                  [&] {
                    RoundLink& link = *group("alpha").link();
                    if (!etcd()) {
                      EXPECT_EQ(link.exclude(0, "-"),
                                "machine 0 hosts the job's rendezvous (c10d): the others need it");
                    }
                    EXPECT_EQ(link.exclude(2, why), "");
                  }),
               then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), [this] {
                 RoundLink* link = group("gamma").link();
                 ASSERT_TRUE(world_->awaitReadable(link->fd(), world_->now() + 60s));
                 const testing::Heard heard{world_->nowMs(), link->takeEvents().front()};
                 AttemptReport last;
                 last.regrouped = heard.event.grows;
                 last.excluded_machine = heard.event.excluded;
                 RoundDecision decided = group("gamma").endRound(last, /*stopping=*/true);
                 std::lock_guard lock(mutex_);
                 heard_["gamma"] = heard;
                 decided_["gamma"] = decided;
               }});
  expectRestart({"alpha", "beta"}, heard_["alpha"].at_ms, LinkEvent::Kind::kGroupGrows,
                /*counted=*/false, 0);
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(heard_[n].at_ms, heard_["alpha"].at_ms) << n;
    EXPECT_EQ(heard_[n].event.excluded, 2) << n;
    EXPECT_EQ(heard_[n].event.grows, why) << n;
  }
  EXPECT_FALSE(decided_["gamma"].restart);
  EXPECT_EQ(decided_["alpha"].why, why + " (not counted as a restart)");
  EXPECT_EQ(decided_["alpha"].expect_machines, 2);
  expectMet({"alpha", "beta"}, met_ms_["alpha"], 1, 4, 0);
  EXPECT_EQ(placed_["beta"].machine_rank, 1);
}

// A machine that registers for the next round and dies before a round takes it costs the job no
// restart: the group ends with the machines that live (delta registers at 1 s and dies at 1.01 s;
// beta's agent takes part in a round's end only from 1.5 s on, so no round closes before then;
// epsilon comes at 3 s), every decision uncounted, restart count 0. (The store's master sees
// delta gone at once and re-forms only for epsilon; etcd cannot tell delta's registration from a
// living one until its lease ends: the group re-forms for it, and again without it when the lease
// ends, neither counted.)
TEST_P(MembershipTest, ADeadArrivalCostsNoRestart) {
  twoMeet();
  agent("delta", 29503), agent("epsilon", 29504);
  world_->run({followsUntil("alpha", 3, 3000ms), at(1500ms, followsUntil("beta", 3, 3000ms)),
               tries("delta", 1000ms), at(1010ms, [this] { kill("delta"); }),
               then({meets("epsilon", true, 3000ms)})});
  EXPECT_FALSE(counted_);
  EXPECT_NE(tried_["delta"].rfind("machine ", 0), 0u) << "delta, dead, was placed";
  for (const std::string n : {"alpha", "beta", "epsilon"}) {
    EXPECT_EQ(placed_[n].world_size, 6) << n;
    EXPECT_EQ(placed_[n].restart_count, 0) << n;
    EXPECT_GE(met_ms_[n], 3000) << n;
  }
  EXPECT_EQ(placed_["epsilon"].machine_rank, 2);
  if (!etcd()) {
    EXPECT_EQ(group("alpha").round(), 1);  // one re-forming: for epsilon alone
  }
}

// A machine that fails its health check stays out, and joins once it passes: gamma's check fails
// ("disk full") until 3 s and is asked every 500 ms. alpha and beta meet as two at the last call
// (310 ms) and go on; gamma says once why it stays out, registers at its first look after 3 s,
// and the group, which has room, re-forms as three, uncounted.
TEST_P(MembershipTest, AnUnhealthyMachineStaysOutAndJoinsOnceHealthy) {
  agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502);
  std::atomic<int> looks{0};
  static_cast<RoundGroup&>(group("gamma"))
      .setHealthGate(
          [this, &looks]() -> std::optional<std::string> {
            ++looks;
            if (world_->nowMs() < 3000) return "disk /scratch failed: 10 MiB free, below 64 MiB";
            return std::nullopt;
          },
          500ms);
  world_->run({then({meets("alpha", true), followsUntil("alpha", 3, 3000ms)}),
               then({meets("beta", true, 10ms), followsUntil("beta", 3, 3000ms)}),
               meets("gamma", true, 20ms)});
  EXPECT_EQ(looks, 7);  // at 20 ms, every 500 ms after, healthy at 3020 ms
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(placed_[n].world_size, 6) << n;
    EXPECT_EQ(placed_[n].restart_count, 0) << n;  // its arrival is no restart
    EXPECT_GE(met_ms_[n], 3020) << n;
    EXPECT_LE(met_ms_[n], 3020 + 1000) << n;
  }
  EXPECT_EQ(placed_["gamma"].machine_rank, 2);
  EXPECT_TRUE(said("gamma",
                   "20 ms: this machine fails its health check (disk /scratch failed: 10 MiB free, "
                   "below 64 MiB): it stays out of round 0 and checks again every 0.5 s"));
  EXPECT_TRUE(said("gamma", "3020 ms: health checks pass again: this machine joins the job"));
}

// A job of a fixed size waits for its unhealthy machine: nobody starts before gamma passes its
// check at 2 s; then all three meet at once, and the others' progress named what they wait for.
TEST_P(MembershipTest, AFixedSizeJobWaitsForItsUnhealthyMachine) {
  plan_.min_machines = 3;
  agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502);
  static_cast<RoundGroup&>(group("gamma"))
      .setHealthGate(
          [this]() -> std::optional<std::string> {
            if (world_->nowMs() < 2000) return "command failed: NIC eth1 link down (exit 1)";
            return std::nullopt;
          },
          250ms);
  world_->run({meets("alpha", true), meets("beta", true, 10ms), meets("gamma", true, 20ms)});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_EQ(placed_[n].world_size, 6) << n;
    EXPECT_GE(met_ms_[n], 2000) << n;
    EXPECT_LE(met_ms_[n], 2000 + 300) << n;
  }
}

// A member killed while the round ends: alpha's workers fail at 1 s; beta hears it and its agent
// dies before it reported its end. The others do not wait for that report until the close
// timeout (35 s): the loss is found (the store: its presence; etcd: its lease's end, a window
// later) and they decide one counted restart for the two left, who meet as 2 x 2.
TEST_P(MembershipTest, AMemberKilledWhileTheRoundEndsIsNotWaitedFor) {
  threeMeet();
  world_->run(
      {then({failsAndEnds("alpha", 1000ms, 1, "RuntimeError: boom"), meets("alpha", false)}),
       then({hearsAndEnds("gamma"), meets("gamma", false)}), [this] {
         ASSERT_TRUE(world_->awaitReadable(group("beta").link()->fd(), SimWorld::at(5s)));
         kill("beta");
       }});
  for (const std::string n : {"alpha", "gamma"}) {
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_TRUE(decided_[n].counted) << n;
    EXPECT_EQ(decided_[n].expect_machines, 2) << n;
    EXPECT_LE(decided_ms_[n], 1000 + 2000) << n;  // a window (1 s) and the looks, not 35 s
    EXPECT_EQ(placed_[n].world_size, 4) << n;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;
  }
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["gamma"].machine_rank, 1);
}

// A machine beyond MAX waits as a spare, says so at once, and takes the place of a member lost
// later: one restart, counted for the loss.
TEST_P(MembershipTest, ASpareWaitsAndTakesALostMachinesPlace) {
  threeMeet();
  agent("delta", 29503);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}), meets("delta", true, 500ms),
               at(1050ms, [this] { kill("gamma"); })});
  EXPECT_EQ(decided_["alpha"].expect_machines, 3);
  expectMet({"alpha", "beta", "delta"}, met_ms_["alpha"], 1, 6, 1);
  EXPECT_EQ(placed_["delta"].machine_rank, 2);
  EXPECT_TRUE(said("delta",
                   "500 ms: round 0 is full (3 machines, the most the job takes): this machine "
                   "waits as a spare for a later round"));
}

// Spares never form a second group beside a running one: two of them (the job's MIN) wait from
// 0.5 s to 10 s, when both are interrupted, placed nowhere; the running group hears nothing.
TEST_P(MembershipTest, SparesDoNotFormASecondGroupWhileTheGroupRuns) {
  threeMeet();
  agent("delta", 29503), agent("epsilon", 29504);
  world_->run({tries("delta", 500ms), tries("epsilon", 500ms), at(10s, [this] {
                 group("delta").interrupt();
                 group("epsilon").interrupt();
               })});
  for (const std::string n : {"delta", "epsilon"}) {
    EXPECT_NE(tried_[n].find("interrupted"), std::string::npos) << n << ": " << tried_[n];
  }
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(group(n).link()->takeEvents().empty()) << n << ": the running group was stopped";
  }
}

// No blind retry: gamma's rank 4 fails before any step (a missing module), restarted once; in the
// next round beta's rank 2 fails the same way: every machine decides not to restart, naming both.
TEST_P(MembershipTest, TheSameFailureTwiceIsNotRetried) {
  const std::string line = "ModuleNotFoundError: No module named 'missing'";
  threeMeet();
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({failsAndEnds("gamma", 2000ms, 1, line), meets("gamma", false)})});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;
  }
  world_->run(
      {hearsAndEnds("alpha"), failsAndEnds("beta", 3000ms, 1, line), hearsAndEnds("gamma")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_FALSE(decided_[n].restart) << n;
    EXPECT_NE(decided_[n].why.find("attempts 0 and 1 failed the same way before any rank "
                                   "wrote to stdout"),
              std::string::npos)
        << n << ": " << decided_[n].why;
  }
}

// --max_restarts 1: the first failure is restarted (1 of 1), the second stops every machine.
TEST_P(MembershipTest, ASpentBudgetStopsEveryMachine) {
  plan_.max_restarts = 1;
  threeMeet();
  world_->run({then({failsAndEnds("alpha", 1000ms, 1, "first"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({hearsAndEnds("gamma"), meets("gamma", false)})});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(placed_[n].restart_count, 1) << n;
  }
  world_->run(
      {hearsAndEnds("alpha"), hearsAndEnds("beta"), failsAndEnds("gamma", 5000ms, 2, "second")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_FALSE(decided_[n].restart) << n;
    EXPECT_NE(decided_[n].why.find("the job's 1 restart is spent"), std::string::npos)
        << n << ": " << decided_[n].why;
  }
}

// Two members lost at once leave one machine, fewer than MIN (2): the survivor stops, saying so.
TEST_P(MembershipTest, BelowMinTheSurvivorStops) {
  threeMeet();
  world_->run({hearsAndEnds("alpha"), at(1050ms, [this] {
                 kill("beta");
                 kill("gamma");
               })});
  EXPECT_FALSE(decided_["alpha"].restart);
  EXPECT_NE(decided_["alpha"].why.find("1 of the 2 machines the job needs"), std::string::npos)
      << decided_["alpha"].why;
}

// Below MIN, machines already waiting to join count: delta waits as a spare beside a full group
// from 0.5 s; beta and gamma die at 1.05 s, leaving alpha, one of MIN 2 — with delta two, so the
// job goes on as alpha and delta (one restart, counted for the losses).
TEST_P(MembershipTest, BelowMinAMachineWaitingToJoinKeepsTheJobGoing) {
  threeMeet();
  agent("delta", 29503);
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}), meets("delta", true, 500ms),
               at(1050ms, [this] {
                 kill("beta");
                 kill("gamma");
               })});
  EXPECT_TRUE(decided_["alpha"].restart) << decided_["alpha"].why;
  EXPECT_EQ(decided_["alpha"].expect_machines, 2);
  expectMet({"alpha", "delta"}, met_ms_["alpha"], 1, 4, 1);
  EXPECT_EQ(placed_["alpha"].machine_rank, 0);
  EXPECT_EQ(placed_["delta"].machine_rank, 1);
}

// A job of a fixed size (--nnodes 3) cannot go on without a machine: gamma lost, the others
// stop, naming it and saying how a job goes on with fewer.
TEST_P(MembershipTest, AFixedSizeJobStopsWhenAMachineIsLost) {
  plan_.min_machines = 3;
  plan_.max_restarts = 3;
  threeMeet();
  world_->run({hearsAndEnds("alpha"), hearsAndEnds("beta"), at(1050ms, [this] { kill("gamma"); })});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 2) << n;
    EXPECT_FALSE(decided_[n].restart) << n;
    EXPECT_NE(decided_[n].why.find("the job needs all 3 machines (--nnodes MIN:MAX lets a job go "
                                   "on with fewer)"),
              std::string::npos)
        << n << ": " << decided_[n].why;
  }
}

// No blind retry, whoever fails second: gamma's rank fails first, then alpha's — machine 0, on the
// store the one that decides — the same way, neither attempt completing a step: no restart.
TEST_P(MembershipTest, TheSameFailureTwiceStopsWhicheverMachineFailsSecond) {
  const std::string line = "ModuleNotFoundError: No module named 'missing'";
  threeMeet();
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({failsAndEnds("gamma", 2000ms, 1, line), meets("gamma", false)})});
  world_->run(
      {failsAndEnds("alpha", 3000ms, 1, line), hearsAndEnds("beta"), hearsAndEnds("gamma")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_FALSE(decided_[n].restart) << n;
    EXPECT_NE(decided_[n].why.find("failed the same way before any rank wrote to stdout (no "
                                   "heartbeats: the agent sees no steps)"),
              std::string::npos)
        << n << ": " << decided_[n].why;
  }
}

// The same failure after progress is retried: some rank completed steps in the round between
// (alpha's reached step 40), so the second ModuleNotFoundError-alike is a new failure, restarted.
TEST_P(MembershipTest, TheSameFailureAfterProgressIsRetried) {
  const std::string line = "RuntimeError: NCCL timeout";
  threeMeet();
  world_->run({then({hearsAndEnds("alpha"), meets("alpha", false)}),
               then({hearsAndEnds("beta"), meets("beta", false)}),
               then({failsAndEnds("gamma", 2000ms, 1, line), meets("gamma", false)})});
  world_->run(
      {hearsAndEnds("alpha", 40), failsAndEnds("beta", 3000ms, 1, line), hearsAndEnds("gamma")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_EQ(decided_[n].restart_count, 2) << n;
  }
}

// A machine that registers while round 0 forms and dies before it closes (--nnodes 2:4; gamma at
// 100 ms, dead at 150 ms; alpha and beta close at the last call) is no member of the job for long.
// The store's master sees its connection close and closes the round without it. etcd cannot tell
// its registration from a living one until its lease ends (the window, 1 s): the round closes with
// it, finds at the lease's end that it never started, and re-forms without it, uncounted.
TEST_P(MembershipTest, AJoinerThatDiesBeforeTheRoundClosesIsNoMember) {
  plan_.num_machines = 4;
  agent("alpha", 29500), agent("beta", 29501), agent("gamma", 29502);
  if (!etcd()) {
    world_->run({meets("alpha", true), meets("beta", true, 10ms), tries("gamma", 100ms),
                 at(150ms, [this] { kill("gamma"); })});
    for (const std::string n : {"alpha", "beta"}) {
      EXPECT_EQ(placed_[n].num_machines, 2) << n;
      EXPECT_EQ(placed_[n].restart_count, 0) << n;
      EXPECT_LE(met_ms_[n], 150 + 1000) << n;  // within a window of its death
    }
    EXPECT_NE(tried_["gamma"].rfind("machine ", 0), 0u) << "gamma, dead, was placed";
    return;
  }
  world_->run({then({meets("alpha", true), hearsAndEnds("alpha"), meets("alpha", false)}),
               then({meets("beta", true, 10ms), hearsAndEnds("beta"), meets("beta", false)}),
               tries("gamma", 100ms), at(150ms, [this] { kill("gamma"); })});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_TRUE(decided_[n].restart) << n << ": " << decided_[n].why;
    EXPECT_FALSE(decided_[n].counted) << n;
    EXPECT_EQ(placed_[n].num_machines, 2) << n;
    EXPECT_EQ(placed_[n].restart_count, 0) << n;
    EXPECT_LE(met_ms_[n], 150 + 1000 + 500) << n;
  }
}

// A round that waits says so every few seconds (the progress interval, 5 s): alpha and beta
// (MIN 2) start a last call of 12 s at 10 ms; at 5 s alpha says how long it has left — the
// store's master, which alone watches the round there, and on etcd every agent — and the round
// closes at its end.
TEST_P(MembershipTest, AWaitingRoundSpeaksEveryFewSeconds) {
  plan_.round_timeouts.last_call = 12s;
  plan_.round_timeouts.progress = 5s;
  twoMeet();
  EXPECT_EQ(met_ms_["alpha"], 12010);
  const std::string line = "rendezvous: " + std::string(etcd() ? "round 0: " : "") +
                           "2 of 2–3 machines; the round closes in 7 s unless more come (the "
                           "last call)";
  bool heard = false;
  {
    std::lock_guard lock(mutex_);
    for (const auto& l : said_["alpha"]) heard = heard || l.find(line) != std::string::npos;
  }
  EXPECT_TRUE(heard) << "alpha said:\n" << saidText("alpha");
}

// The notice is said at the progress interval, not at each wake-up: beta's arrival at 1 s starts
// a last call of 3 s that closes the round at 4 s, before the first notice is due (5 s) — nobody
// says how many machines joined (the master once said so at the arrival, and on a real store
// again each time its wait ended a fraction of a millisecond before the last call's end).
TEST_P(MembershipTest, ARoundThatClosesBeforeItsFirstNoticeSaysNothing) {
  plan_.round_timeouts.last_call = 3s;
  plan_.round_timeouts.progress = 5s;
  agent("alpha", 29500), agent("beta", 29501);
  world_->run({meets("alpha", true), meets("beta", true, 1000ms)});
  EXPECT_GE(met_ms_["alpha"], 4000);
  EXPECT_LT(met_ms_["alpha"], 4500);
  std::lock_guard lock(mutex_);
  for (const std::string n : {"alpha", "beta"}) {
    for (const auto& l : said_[n])
      EXPECT_EQ(l.find("of 2–3 machines"), std::string::npos) << n << ": " << l;
  }
}

// Without restarts (--max_restarts 0, a fixed size) every machine's report names the round's
// first failure as the store (or etcd) holds it.
TEST_P(MembershipTest, WithoutRestartsEveryMachineNamesTheFirstFailure) {
  plan_.max_restarts = 0;
  plan_.min_machines = 3;
  threeMeet();
  world_->run({hearsAndEnds("alpha"), failsAndEnds("beta", 1000ms, 3, "RuntimeError: boom"),
               hearsAndEnds("gamma")});
  for (const std::string n : {"alpha", "beta", "gamma"}) {
    EXPECT_FALSE(decided_[n].restart) << n;
    ASSERT_TRUE(ended_[n].job_failure.has_value()) << n;
    EXPECT_EQ(ended_[n].job_failure->rank, 2) << n;
    EXPECT_EQ(ended_[n].job_failure->exit_code, 3) << n;
  }
}

// Ctrl-C or SIGTERM while an agent waits in a later round that cannot form: its meet() returns at
// that instant, saying it was interrupted — not at a timeout, not with a placement.
TEST_P(MembershipTest, AnInterruptEndsALaterRoundsMeetingAtOnce) {
  twoMeet();
  const std::string error = interruptedWhileMeeting("alpha", 2000ms);
  EXPECT_NE(error.find("interrupted while it formed"), std::string::npos) << error;
}

// Machine 0 lost: on the store its agent hosted the job's store, the job's one point of failure —
// the others stop, naming it, and restart nothing; on etcd it is lost like any other and the
// others re-form with beta as machine 0.
TEST_P(MembershipTest, MachineZeroLost) {
  threeMeet();
  world_->run({hearsAndEnds("beta"), hearsAndEnds("gamma"), at(1050ms, [this] { kill("alpha"); })});
  for (const std::string n : {"beta", "gamma"}) {
    EXPECT_EQ(heard_[n].event.failure.machine_rank, 0) << n;
    EXPECT_EQ(decided_[n].restart, etcd()) << n << ": " << decided_[n].why;
  }
  if (!etcd()) {
    EXPECT_NE(
        heard_["beta"].event.failure.reason.find("lost contact with the master agent's store"),
        std::string::npos)
        << heard_["beta"].event.failure.reason;
    return;
  }
  world_->run({meets("beta", false), meets("gamma", false)});
  EXPECT_EQ(placed_["beta"].machine_rank, 0);
  EXPECT_EQ(placed_["gamma"].machine_rank, 1);
  EXPECT_EQ(placed_["beta"].master_port, 29501);
}

}  // namespace
}  // namespace accel::launcher
