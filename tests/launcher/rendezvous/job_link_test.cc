// The master's JobLink in fake time, over an in-memory store (watches included): the instants at
// which a silent member is found lost, those at which a moving or finished one is not, and the tick
// at which an arrival regroups. The link's thread runs on a StepClock that the test moves:
// advanceTo(t) lets the thread do everything due up to t (each wait's deadline in turn) and returns
// once it waits for a later one, so what the test reads then is what the link did by t.

#include "launcher/rendezvous/c10d/job_link.h"

#include <poll.h>
#include <sys/epoll.h>

#include <condition_variable>
#include <mutex>

#include <gtest/gtest.h>

#include "launcher/rendezvous/round/keys.h"
#include "memory_link_store.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

// Time moves only when the test says, and only as far as the link's next deadline at a time.
class StepClock : public Clock {
 public:
  time_point now() const override {
    std::lock_guard lock(mutex_);
    return now_;
  }

  // What is ready now, else: parked until the test moves the time to `deadline` (descriptors
  // that become ready meanwhile — a stop, the watch — end the wait at once).
  int wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) override {
    std::unique_lock lock(mutex_);
    parked_deadline_ = deadline;
    parked_ = true;
    changed_.notify_all();
    while (now_ < deadline) {
      lock.unlock();
      const int n = ::epoll_wait(epollFd, events, maxEvents, 1);  // the clock's idle, not a sync
      lock.lock();
      if (n != 0) {
        parked_ = false;
        return n;
      }
    }
    parked_ = false;
    return 0;
  }

  // The link's thread never pauses without a descriptor; a test thread may, until `deadline`.
  void sleepUntil(time_point deadline) override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return now_ >= deadline; });
  }

  // Runs the link's thread through every deadline up to `t`, then sets the time to `t`.
  void advanceTo(time_point t) {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return parked_; });
      if (parked_deadline_ > t) break;
      now_ = std::max(now_, parked_deadline_);
      parked_ = false;  // it runs on: wait until it parks again
    }
    now_ = std::max(now_, t);
    changed_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  time_point now_{};
  time_point parked_deadline_{};
  bool parked_ = false;
};

Clock::time_point at(std::chrono::milliseconds ms) { return Clock::time_point{} + ms; }

class JobLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    settings_.num_machines = 2;
    settings_.clock = clock_;  // the link thread's time and waits
  }

  // A connection of the master's link to the job's store.
  std::unique_ptr<LinkStore> connection() {
    return std::make_unique<testing::MemoryLinkStore>(store_);
  }

  // The master's link of round 0 over `machines` (of at most `max`, named alpha, beta):
  // keep-alives every second, a 3 s window, members looked at every 100 ms.
  std::unique_ptr<JobLink> masterLink(int machines = 2, int max = 2) {
    LinkConnections c{connection(), -1, connection(), connection()};
    c.watch_fd = c.watch->startWait({roundKeys(settings_, 0).stop()});
    LinkOptions o;
    o.machines = machines;
    o.max_machines = max;
    o.hosts.assign({"alpha", "beta"});
    o.hosts.resize(static_cast<size_t>(machines));
    return std::make_unique<JobLink>(std::move(c), settings_, 0, 0, "alpha", o);
  }

  void memberKeepsAlive() { store_.add(roundKeys(settings_, 0).alive(1), 1); }

  // Machine 1 is not lost at `notYet`, and is the one machine lost by `by`.
  void expectLostBetween(JobLink& link, Clock::time_point notYet, Clock::time_point by) {
    clock_->advanceTo(notYet);
    EXPECT_TRUE(link.lostMachines().empty()) << "lost before its window ended";
    clock_->advanceTo(by);
    const auto lost = link.lostMachines();
    ASSERT_EQ(lost.size(), 1u);
    EXPECT_EQ(lost[0].machine, 1);
  }

  // The link's events, once its descriptor says there are some (the watch fires on a thread of
  // its own: it may come after advanceTo returned). Empty after 10 s: none came.
  static std::vector<LinkEvent> eventsOf(JobLink& link) {
    pollfd p{link.fd(), POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return {};
    return link.takeEvents();
  }

  std::shared_ptr<StepClock> clock_ = std::make_shared<StepClock>();
  GroupSettings settings_;
  store::MemoryStore store_;  // the job's store, the members' view of it included
};

// Machine 1 never sends a keep-alive: not lost at 2.95 s, lost by the look at 3.0 s (the
// window, 1 s x 3, from the round's start), named with how.
TEST_F(JobLinkTest, ASilentMemberIsLostAtTheWindowsEnd) {
  auto link = masterLink();
  expectLostBetween(*link, at(2950ms), at(3050ms));
  link->stop();
}

// Machine 1 sends keep-alives at 1, 2, 3 and 4 s (each just after the master's look at that
// instant, so seen at the next, 100 ms on) and then falls silent: never lost while it moves,
// lost 3 s after the look that saw it move last (4.1 s): not at 7.05 s, by 7.15 s.
TEST_F(JobLinkTest, AMovingMemberIsNotLostUntilItFallsSilent) {
  auto link = masterLink();
  for (int s = 1; s <= 4; ++s) {
    clock_->advanceTo(at(std::chrono::seconds(s)));
    memberKeepsAlive();
  }
  expectLostBetween(*link, at(7050ms), at(7150ms));
  link->stop();
}

// Machine 1 says it finished (its workers ended, its agent left) at 0.5 s and sends nothing
// more: not lost, long past its window.
TEST_F(JobLinkTest, AMemberThatFinishedIsNotLost) {
  auto link = masterLink();
  clock_->advanceTo(at(500ms));
  store_.set(roundKeys(settings_, 0).finished(1), "1");
  clock_->advanceTo(at(10s));
  EXPECT_TRUE(link->lostMachines().empty());
  link->stop();
}

// A group of 1 of at most 2: a machine registers for round 1 at 0.5 s. The master's link finds
// it at its next keep-alive tick (1 s), not before, and every link hears "the group grows" —
// not a failure, nothing lost.
TEST_F(JobLinkTest, AnArrivalRegroupsAtTheNextTickAndIsNotAFailure) {
  auto owned = masterLink(1, 2);
  JobLink& link = *owned;
  clock_->advanceTo(at(500ms));
  store_.add(jobKeys(settings_).round(1).arrivals(), 1);
  clock_->advanceTo(at(950ms));
  EXPECT_FALSE(store_.check({roundKeys(settings_, 0).stop()})) << "found before its tick";
  clock_->advanceTo(at(1050ms));
  const auto events = eventsOf(link);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, LinkEvent::Kind::kGroupGrows);
  EXPECT_EQ(events[0].grows,
            "a machine is waiting to join (the group has 1 of at most 2): the group re-forms to "
            "take it");
  EXPECT_EQ(events[0].failure.machine_rank, -1);  // no failure
  EXPECT_TRUE(link.lostMachines().empty());
  link.stop();
}

// A member's link (machine 1): it adds to its keep-alive key at every tick (0, 1, 2 s), and the
// master's store gone — its watch's connection cut at 2 s — is heard as the job's failure,
// naming the store, with masterLost() set.
TEST_F(JobLinkTest, AMemberKeepsAliveAndHearsTheMastersStoreLost) {
  auto watch = std::make_unique<testing::MemoryLinkStore>(store_);
  testing::MemoryLinkStore* masterSide = watch.get();
  LinkConnections c{std::move(watch), -1, connection(), connection()};
  c.watch_fd = c.watch->startWait({roundKeys(settings_, 0).stop()});
  settings_.store_address = "alpha:29500";
  LinkOptions o;
  o.machines = o.max_machines = 2;
  o.hosts = {"alpha", "beta"};
  JobLink link(std::move(c), settings_, 0, 1, "alpha", o);
  clock_->advanceTo(at(2s));
  EXPECT_EQ(store_.add(roundKeys(settings_, 0).alive(1), 0), 3);
  EXPECT_FALSE(link.masterLost());
  masterSide->interrupt();
  const auto events = eventsOf(link);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, LinkEvent::Kind::kRemoteFailure);
  EXPECT_EQ(events[0].failure.machine_rank, 0);
  EXPECT_EQ(events[0].failure.host, "alpha");
  EXPECT_EQ(events[0].failure.reason.rfind(
                "lost contact with the master agent's store at alpha:29500 (the connection", 0),
            0u)
      << events[0].failure.reason;
  EXPECT_TRUE(link.masterLost());
  link.stop();
}

}  // namespace
}  // namespace accel::launcher
