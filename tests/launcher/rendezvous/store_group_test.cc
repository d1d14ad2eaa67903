// Whole StoreGroups — connect, meet, the link, a round's end, meeting again, the exit barrier —
// as three agents (threads) of one job over the job's store in memory (memory_group_store.h):
// no server, no socket, no port. What each agent is told and decides is asserted, in order;
// the instants are the rules' (sim_world.h, job_link_test.cc), so here time is real but short
// and no assertion depends on it.

#include "launcher/rendezvous/store_group.h"

#include <poll.h>

#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "memory_group_store.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using testing::MemoryGroupStore;
using testing::MemoryStoreServer;

class StoreGroupTest : public ::testing::Test {
 protected:
  // A job of 2 to 3 machines with 2 ranks each, windows of a tenth of a second.
  StoreGroupTest() {
    plan_.rendezvous_id = "mem";
    plan_.num_machines = 3;
    plan_.min_machines = 2;
    plan_.local_world_size = 2;
    plan_.world_size = 6;
    plan_.max_restarts = 3;
    plan_.rdzv_timeout = 10s;
    plan_.last_call_timeout = 300ms;
    plan_.keep_alive_interval = 100ms;
    plan_.keep_alive_misses = 3;
    plan_.round_close_timeout = 5s;
  }

  // Agent `name`: machine 0 (the store's host) when `master`, else ranked by arrival.
  StoreGroup& agent(const std::string& name, bool master, const LaunchPlan* plan = nullptr) {
    auto store = std::make_unique<MemoryGroupStore>(server_, master);
    stores_[name] = store.get();
    Notify notify = [this, name](const std::string& line) {
      std::lock_guard lock(mutex_);
      said_[name].push_back(line);
    };
    auto& group = groups_[name];
    group = std::make_unique<StoreGroup>(plan ? *plan : plan_, env_, notify,
                                         master ? std::optional<int>(0) : std::nullopt, 29500,
                                         std::move(store));
    return *group;
  }

  // Runs each agent's `body` on a thread of its own; returns when all did.
  void together(const std::vector<std::function<void()>>& bodies) {
    std::vector<std::thread> threads;
    for (const auto& b : bodies) threads.emplace_back(b);
    for (auto& t : threads) t.join();
  }

  // Every agent of `names` meets in the next round (connecting first in round 0).
  std::map<std::string, Placement> meetAll(const std::vector<std::string>& names, bool first) {
    std::map<std::string, Placement> placed;
    std::vector<std::function<void()>> bodies;
    for (const auto& n : names) {
      bodies.push_back([this, n, first, &placed] {
        StoreGroup& g = *groups_.at(n);
        if (first) {
          ASSERT_TRUE(g.connect().ok()) << n;
        }
        auto p = g.meet();
        ASSERT_TRUE(p.ok()) << n << ": " << p.error();
        std::lock_guard lock(mutex_);
        placed[n] = *p;
      });
    }
    together(bodies);
    return placed;
  }

  // The first event of `name`'s link (waiting at most 10 s for one).
  LinkEvent nextEvent(const std::string& name) {
    RoundLink* link = groups_.at(name)->link();
    pollfd p{link->fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1) << name << ": no link event";
    auto events = link->takeEvents();
    EXPECT_FALSE(events.empty());
    return events.empty() ? LinkEvent{} : events.front();
  }

  bool saidLine(const std::string& name, const std::string& part) {
    std::lock_guard lock(mutex_);
    for (const auto& line : said_[name]) {
      if (line.find(part) != std::string::npos) return true;
    }
    return false;
  }

  LaunchPlan plan_;
  probes::Environment env_;
  MemoryStoreServer server_{"mem"};
  std::map<std::string, MemoryGroupStore*> stores_;
  std::map<std::string, std::unique_ptr<StoreGroup>> groups_;
  std::mutex mutex_;
  std::map<std::string, std::vector<std::string>> said_;
};

TEST_F(StoreGroupTest, AMemberWhoseAgentDiesIsDroppedAndTheOthersMeetAgainAsTwo) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  auto placed = meetAll({"alpha", "beta", "gamma"}, true);
  EXPECT_EQ(placed["alpha"].machine_rank, 0);
  EXPECT_EQ(placed["alpha"].rank_offset, 0);
  const std::set<int> members{placed["beta"].machine_rank, placed["gamma"].machine_rank};
  EXPECT_EQ(members, (std::set<int>{1, 2}));
  for (const auto& [name, p] : placed) {
    EXPECT_EQ(p.world_size, 6) << name;
    EXPECT_EQ(p.num_machines, 3) << name;
    EXPECT_EQ(p.rank_offset, 2 * p.machine_rank) << name;
    EXPECT_EQ(p.restart_count, 0) << name;
    EXPECT_EQ(groups_[name]->round(), 0) << name;
  }
  const int gammaRank = placed["gamma"].machine_rank;

  // gamma's agent dies: its connections close, and the master finds it gone by its presence
  // (not after the keep-alive window); every link hears it as the job's failure.
  stores_["gamma"]->kill();
  for (const std::string n : {"alpha", "beta"}) {
    LinkEvent e = nextEvent(n);
    EXPECT_EQ(e.kind, LinkEvent::Kind::kRemoteFailure) << n;
    EXPECT_EQ(e.failure.reason,
              "lost: its agent is gone (its connection to the job's store closed)")
        << n;
    EXPECT_EQ(e.failure.machine_rank, gammaRank) << n;
  }
  const auto lost = groups_["alpha"]->link()->lostMachines();  // the master's link found it
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].machine, gammaRank);
  EXPECT_EQ(lost[0].how, "its agent is gone");

  // The two that are left agree on one decision: a restart, counted once, as a group of two.
  std::map<std::string, RoundDecision> decided;
  together({[&] {
              AttemptReport last;
              decided["alpha"] = groups_["alpha"]->endRound(last, false);
            },
            [&] {
              AttemptReport last;
              decided["beta"] = groups_["beta"]->endRound(last, false);
            }});
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_TRUE(decided[n].restart) << n << ": " << decided[n].why;
    EXPECT_TRUE(decided[n].counted) << n;
    EXPECT_EQ(decided[n].restart_count, 1) << n;
    EXPECT_EQ(decided[n].expect_machines, 2) << n;
  }
  EXPECT_EQ(decided["alpha"].why, decided["beta"].why);

  groups_["alpha"]->stopLink(), groups_["beta"]->stopLink();
  auto again = meetAll({"alpha", "beta"}, false);
  EXPECT_EQ(again["alpha"].machine_rank, 0);
  EXPECT_EQ(again["beta"].machine_rank, 1);
  for (const std::string n : {"alpha", "beta"}) {
    EXPECT_EQ(again[n].world_size, 4) << n;
    EXPECT_EQ(again[n].restart_count, 1) << n;
    EXPECT_EQ(groups_[n]->round(), 1) << n;
  }
  EXPECT_TRUE(saidLine("alpha", "attempt 1: removed"));  // the workers' keys of round 0 went
}

// Ctrl-C or SIGTERM while an agent waits in a later round's rendezvous: the supervisor turns
// either into interrupt() (SignalWhileMeeting, supervisor_test.cc); here the real group's side.
// The master waits in round 1 for a machine that never comes (MIN is 2, --rdzv_timeout 10 s);
// interrupted once its registration is in, its meet() returns an error at once — not the
// rendezvous' timeout, and not a placement.
TEST_F(StoreGroupTest, AnInterruptEndsTheMeetingOfALaterRoundAtOnce) {
  agent("alpha", true), agent("beta", false);
  meetAll({"alpha", "beta"}, true);
  groups_["alpha"]->stopLink();
  const std::string registered = JobKeys("mem").round(1).arrivals();
  std::optional<Expected<Placement>> met;
  const auto start = std::chrono::steady_clock::now();
  together({[&] { met.emplace(groups_["alpha"]->meet()); },
            [&] {
              while (server_.data().add(registered, 0) < 1) std::this_thread::yield();
              groups_["alpha"]->interrupt();
            }});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(met.has_value());
  ASSERT_FALSE(met->ok()) << "round 1 formed without beta";
  EXPECT_EQ(met->error().find("timed out"), std::string::npos) << met->error();
  EXPECT_LT(took, plan_.rdzv_timeout / 2) << met->error();
}

TEST_F(StoreGroupTest, TheExitBarrierHoldsTheStoreUntilTheMembersLeft) {
  agent("alpha", true), agent("beta", false), agent("gamma", false);
  meetAll({"alpha", "beta", "gamma"}, true);
  std::mutex order_mutex;
  std::vector<std::string> order;
  auto note = [&](const std::string& what) {
    std::lock_guard lock(order_mutex);
    order.push_back(what);
  };
  auto member = [&](const std::string& n) {
    return [&, n] {
      groups_.at(n)->stopLink();
      groups_.at(n)->awaitOtherMachines();
      note(n + " left");
      groups_.at(n).reset();  // its process ends: its presence goes
    };
  };
  together({[&] {
              groups_.at("alpha")->stopLink();
              groups_.at("alpha")->awaitOtherMachines();
              note("alpha passed the barrier");
            },
            member("beta"), member("gamma")});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order.back(), "alpha passed the barrier");
  EXPECT_EQ(server_.presentCount(), 1u);  // alpha's own presence, until its group goes
  EXPECT_FALSE(saidLine("alpha", "stopping the store although"));
}

TEST_F(StoreGroupTest, AnAgentOfAnotherJobOnTheSameStoreIsRefusedNamingBothJobs) {
  StoreGroup& master = agent("alpha", true);
  ASSERT_TRUE(master.connect().ok());
  LaunchPlan other = plan_;
  other.rendezvous_id = "other";
  auto refused = agent("intruder", false, &other).connect();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("serves job 'mem'"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("this machine's job is 'other'"), std::string::npos)
      << refused.error();
}

}  // namespace
}  // namespace accel::launcher
