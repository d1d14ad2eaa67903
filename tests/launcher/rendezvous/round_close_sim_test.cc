// The end of failed rounds with several agents, in simulated time (sim_world.h): every agent's
// RoundCloser over one store, with the exact instant at which each hears the job's one decision —
// a failure restarted once and not blindly again when another machine fails the same way, a
// restart budget spent, the store's host lost while the others wait for its decision, a machine
// that died waiting to join not expected in the next round.

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/round_close.h"
#include "sim_world.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using testing::SimClient;
using testing::SimWorld;

// What one agent's part in a round's end gave it, and when.
struct Heard {
  int64_t at_ms = -1;
  RoundDecision decision;
  std::optional<JobFailure> failure;  // the round's first failure, as it read it
};

// A worker's failure: local rank 0 of `machine` (2 ranks each), exit `code`, `line` last.
JobFailure workerFailure(int machine, const std::string& host, int code, const std::string& line) {
  JobFailure f;
  f.machine_rank = machine;
  f.host = host;
  f.local_rank = 0;
  f.rank = 2 * machine;
  f.exit_code = code;
  f.stderr_tail = {"Traceback (most recent call last):", line};
  return f;
}

class RoundCloseSimTest : public ::testing::Test {
 protected:
  // A job of alpha (machine 0: the master, whose store it is), beta and gamma: static, unless a
  // test sets MIN:MAX.
  GroupSettings settings(const std::string& host) {
    GroupSettings o;
    o.run_id = "sim";
    o.min_machines = min_machines_;
    o.num_machines = max_machines_;
    o.present = present_;
    o.max_restarts = max_restarts_;
    o.local_world_size = 2;
    o.host = host;
    o.store_address = "sim:29500";
    o.clock = world_;
    return o;
  }

  SimClient& client(const std::string& host) {
    auto& c = clients_[host];
    if (!c) c = std::make_unique<SimClient>(*world_, data_);
    return *c;
  }

  RoundCloser& closer(const std::string& host) {
    auto& c = closers_[host];
    if (!c) c = std::make_unique<RoundCloser>(settings(host), host == "alpha");
    return *c;
  }

  // Round `round` as it formed: the hosts in machine-rank order, `host` among them.
  static RendezvousResult joined(const std::vector<std::string>& order, const std::string& host,
                                 int restartCount, int maxRestarts) {
    RendezvousResult r;
    for (size_t m = 0; m < order.size(); ++m) {
      r.machines.push_back(
          {order[m], order[m], "", 2, static_cast<int>(m), 2 * static_cast<int>(m)});
      if (order[m] == host) r.machine_rank = static_cast<int>(m);
    }
    r.world_size = 2 * static_cast<int>(order.size());
    r.size = static_cast<int>(order.size());
    r.rank_offset = 2 * r.machine_rank;
    r.restart_count = restartCount;
    r.max_restarts = maxRestarts;
    return r;
  }

  // `host`'s agent in round `start`: at `endsAt` its workers have all ended (a failing one
  // publishes `fails` first, as its link does) and it takes part in the round's end.
  std::function<void()> agent(const std::string& host, const RoundStart& start,
                              const std::vector<std::string>& order,
                              std::chrono::milliseconds endsAt,
                              std::optional<JobFailure> fails = std::nullopt) {
    SimClient& store = client(host);
    RoundCloser& mine = closer(host);
    const GroupSettings o = settings(host);
    const RendezvousResult round = joined(order, host, start.restart_count, max_restarts_);
    return [this, &store, &mine, o, round, start, endsAt, fails, host] {
      world_->sleepUntil(SimWorld::at(endsAt));
      if (fails) publishStop(store, o, start.round, RoundStop::failed(*fails));
      AttemptReport last;
      RoundCloser::GroupNow now;
      now.lost = [] { return std::vector<LostMachine>{}; };
      now.waiting = [&store, o, start] { return presentRegistrations(store, o, start.round + 1); };
      RoundDecision d = mine.close(store, start, round, last, false, now);
      std::lock_guard lock(heard_mutex_);
      heard_[host] = Heard{world_->nowMs(), d, last.job_failure};
    };
  }

  // Every agent of `hosts` heard the same decision at `atMs`; returns it.
  RoundDecision allHeard(const std::vector<std::string>& hosts, int64_t atMs) {
    const RoundDecision& first = heard_.at(hosts.front()).decision;
    for (const auto& h : hosts) {
      const Heard& e = heard_.at(h);
      EXPECT_EQ(e.at_ms, atMs) << h;
      EXPECT_EQ(e.decision.restart, first.restart) << h;
      EXPECT_EQ(e.decision.why, first.why) << h;
      EXPECT_EQ(e.decision.restart_count, first.restart_count) << h;
    }
    return first;
  }

  int max_restarts_ = 3;
  int min_machines_ = 3, max_machines_ = 3;
  std::function<bool(const std::string&)> present_;  // the master's view of presence keys
  std::shared_ptr<SimWorld> world_ = std::make_shared<SimWorld>();
  store::MemoryStore data_;
  std::map<std::string, std::unique_ptr<SimClient>> clients_;
  std::map<std::string, std::unique_ptr<RoundCloser>> closers_;
  std::mutex heard_mutex_;
  std::map<std::string, Heard> heard_;
};

const std::vector<std::string> kAll = {"alpha", "beta", "gamma"};

// Round 0: gamma's rank 4 fails at 2 s; the others' workers end by 2.5 s: the master decides
// then, and every agent hears "restart, 1 of 3" at 2.500 s. Round 1: beta's rank 2 — another
// machine, another rank — fails the same way (exit 1, the same last line) before any step: no
// blind retry; every agent hears it at 12.300 s, naming both attempts and rank 4.
TEST_F(RoundCloseSimTest, TheSameFailureOnAnotherMachineIsNotRetried) {
  const std::string line = "ModuleNotFoundError: No module named 'missing'";
  world_->run({agent("alpha", {0, 0, 0}, kAll, 2500ms), agent("beta", {0, 0, 0}, kAll, 2400ms),
               agent("gamma", {0, 0, 0}, kAll, 2000ms, workerFailure(2, "gamma", 1, line))});
  RoundDecision d = allHeard(kAll, 2500);
  EXPECT_TRUE(d.restart);
  EXPECT_TRUE(d.counted);
  EXPECT_EQ(d.restart_count, 1);
  EXPECT_NE(d.why.find("(1 of 3 restarts, counted for the whole job)"), std::string::npos) << d.why;
  for (const auto& h : kAll) EXPECT_EQ(heard_.at(h).failure->rank, 4) << h;

  const RoundStart round1 = d.next(0);
  world_->run({agent("alpha", round1, kAll, 12300ms),
               agent("beta", round1, kAll, 12000ms, workerFailure(1, "beta", 1, line)),
               agent("gamma", round1, kAll, 12100ms)});
  d = allHeard(kAll, 12300);
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.why.find("(rank 2 on machine 1 (beta) failed with exit code 1"), std::string::npos)
      << d.why;
  EXPECT_NE(d.why.find("attempts 0 and 1 failed the same way before any rank wrote to stdout (no "
                       "heartbeats: the agent sees no steps)"),
            std::string::npos)
      << d.why;
  EXPECT_NE(d.why.find(", as rank 4 did; last stderr line: " + line), std::string::npos) << d.why;
}

// --max_restarts 1: round 0's failure is restarted (1 of 1); round 1 fails otherwise (another
// exit code, so not the same failure): the budget is spent, and every agent hears so at the
// instant the last machine's workers ended, with the one count.
TEST_F(RoundCloseSimTest, ASpentBudgetStopsEveryMachineWithOneCount) {
  max_restarts_ = 1;
  world_->run({agent("alpha", {0, 0, 0}, kAll, 1500ms),
               agent("beta", {0, 0, 0}, kAll, 1000ms, workerFailure(1, "beta", 1, "first")),
               agent("gamma", {0, 0, 0}, kAll, 1700ms)});
  RoundDecision d = allHeard(kAll, 1700);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.restart_count, 1);
  EXPECT_NE(d.why.find("(1 of 1 restarts"), std::string::npos) << d.why;

  const RoundStart round1 = d.next(0);
  world_->run({agent("alpha", round1, kAll, 5000ms, workerFailure(0, "alpha", 2, "second")),
               agent("beta", round1, kAll, 5200ms), agent("gamma", round1, kAll, 5100ms)});
  d = allHeard(kAll, 5200);
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.why.find("the job's 1 restart is spent"), std::string::npos) << d.why;
  EXPECT_EQ(heard_.at("gamma").failure->exit_code, 2);
}

// The master's machine dies (its store with it) at 2.2 s, while gamma — whose rank failed at
// 2 s — waits for its decision and before beta's workers ended: gamma hears that the store is
// lost at 2.200 s, beta at 2.500 s when it reports; neither waits for the decision's timeout
// (close 35 s + 10 s).
TEST_F(RoundCloseSimTest, TheStoresHostLostEndsTheOthersAtOnce) {
  for (const auto& h : kAll) client(h).cutAt(SimWorld::at(2200ms));
  world_->run({agent("beta", {0, 0, 0}, kAll, 2500ms),
               agent("gamma", {0, 0, 0}, kAll, 2000ms, workerFailure(2, "gamma", 1, "x"))});
  for (const auto& [host, at] : {std::pair{"gamma", 2200}, std::pair{"beta", 2500}}) {
    const Heard& e = heard_.at(host);
    EXPECT_EQ(e.at_ms, at) << host;
    EXPECT_FALSE(e.decision.restart) << host;
    EXPECT_EQ(e.decision.why.rfind("lost contact with the master agent's store at sim:29500 (", 0),
              0u)
        << host << ": " << e.decision.why;
  }
  EXPECT_TRUE(heard_.at("gamma").failure.has_value()) << "read before the store went";
  EXPECT_FALSE(heard_.at("beta").failure.has_value()) << "the store was gone";
}

// --nnodes 2:5, a round of three: beta's rank fails at 1 s. Meanwhile two machines registered
// for the next round — one whose agent is still there, one whose agent died waiting (its
// presence gone). The master expects the three and the live one: 4, so the next round closes as
// soon as they are back; counting the dead one (5) would leave it waiting for the last call.
TEST_F(RoundCloseSimTest, AMachineThatDiedWaitingToJoinIsNotExpectedInTheNextRound) {
  min_machines_ = 2;
  max_machines_ = 5;
  present_ = [](const std::string& presence) { return presence != "gone"; };
  const GroupSettings o = settings("alpha");
  for (const char* presence : {"gone", "here"}) {
    const int slot = static_cast<int>(data_.add(roundKeys(o, 1).arrivals(), 1)) - 1;
    data_.set(roundKeys(o, 1).agent(slot), std::string(R"({"token": ")") + presence + "\"}");
  }
  world_->run({agent("alpha", {0, 0, 0}, kAll, 1500ms),
               agent("beta", {0, 0, 0}, kAll, 1000ms, workerFailure(1, "beta", 1, "x")),
               agent("gamma", {0, 0, 0}, kAll, 1200ms)});
  RoundDecision d = allHeard(kAll, 1500);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.restart_count, 1);
  EXPECT_EQ(d.expect_machines, 4) << "the three and the one still waiting";
}

}  // namespace
}  // namespace accel::launcher
