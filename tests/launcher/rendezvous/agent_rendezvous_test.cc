// Agents as threads, rendezvousing through a real store server on loopback.

#include <condition_variable>
#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "accel/error.h"
#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/store/tcp_store_server.h"
#include "libaccel/store/tcp_store_client.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class AgentRendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = store::TcpStoreServer::start({}); }

  GroupSettings options(int machines, int requested, int localWorldSize) {
    GroupSettings o;
    o.num_machines = machines;
    if (requested >= 0) o.requested_machine_rank = requested;  // -1: any
    o.local_world_size = localWorldSize;
    o.host = "host-r" + std::to_string(requested);
    o.store_address = "127.0.0.1:" + std::to_string(server_->port());
    o.timeouts.join = 5s;
    return o;
  }

  // A client of the test's store (one per thread: clients are not thread-safe).
  std::unique_ptr<store::TcpStoreClient> client() {
    store::TcpStoreClientOptions c;
    c.port = server_->port();
    return std::make_unique<store::TcpStoreClient>(c);
  }

  Expected<RendezvousResult> join(const GroupSettings& o, RoundStart start = {}) {
    return rendezvous(*client(), o, start);
  }

  // Returns once `slots` agents have registered in round 0: the rendezvous writes
  // accel/rdzv/<run_id>/round/0/agent/<slot> for each arrival, in slot order. Throws
  // TimeoutError (failing the test) if they never do.
  void awaitRegistered(int slots) {
    client()->wait({roundKeys(GroupSettings{}, 0).agent(slots - 1)}, 10s);
  }

  std::unique_ptr<store::TcpStoreServer> server_;
};

// A value that is not a number where the agents keep one (another program writes under the job's
// keys) is an accel::Error naming the key and the value — which every caller catches — not
// std::invalid_argument ending the agent.
TEST_F(AgentRendezvousTest, AMalformedOpenRoundIsAnErrorNamingKeyAndValue) {
  GroupSettings o = options(2, 1, 1);
  client()->set(jobKeys(o).openRound(), "twelve");
  try {
    openRound(*client(), o, 1s);
    FAIL() << "a round number 'twelve' was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "the key '" + jobKeys(o).openRound() +
                  "' holds 'twelve', not a number (another program writes under this job's keys?)");
  }
}

// The store the rounds meet in, lost: the master's names the master; etcd, which has none,
// names etcd and no master.
TEST(StoreLostTest, NamesTheMastersStoreOrEtcd) {
  GroupSettings o;
  o.store_address = "10.0.0.1:29500";
  EXPECT_EQ(storeLost(o, "reset")
                .rfind("lost contact with the master agent's store at 10.0.0.1:29500 (reset); ", 0),
            0u);
  o.leaderless = true;
  o.store_address = "etcd at e1:2379,e2:2379";
  const std::string etcd = storeLost(o, "timed out");
  EXPECT_EQ(etcd.rfind("lost contact with etcd at e1:2379,e2:2379 (timed out) ", 0), 0u) << etcd;
  EXPECT_EQ(etcd.find("master"), std::string::npos) << etcd;
}

TEST_F(AgentRendezvousTest, RequestedRanksAndOffsets) {
  // Machines of different sizes join in an order unrelated to their ranks: 2, then 1, then 0.
  auto m2 = std::async(std::launch::async, [&] { return join(options(3, 2, 4)); });
  awaitRegistered(1);
  auto m1 = std::async(std::launch::async, [&] { return join(options(3, 1, 2)); });
  awaitRegistered(2);
  auto r0 = join(options(3, 0, 1));
  auto r1 = m1.get(), r2 = m2.get();
  ASSERT_TRUE(r0.ok()) << r0.error();
  ASSERT_TRUE(r1.ok()) << r1.error();
  ASSERT_TRUE(r2.ok()) << r2.error();
  EXPECT_EQ(r0->machine_rank, 0);
  EXPECT_EQ(r1->machine_rank, 1);
  EXPECT_EQ(r2->machine_rank, 2);
  EXPECT_EQ(r0->rank_offset, 0);
  EXPECT_EQ(r1->rank_offset, 1);
  EXPECT_EQ(r2->rank_offset, 3);
  EXPECT_EQ(r2->world_size, 7);
  ASSERT_EQ(r0->machines.size(), 3u);  // the master has every member
  EXPECT_EQ(r0->machines[2].host, "host-r2");
  EXPECT_EQ(r1->size, 3);  // the others read their own place and machine 0, not the whole list
  ASSERT_EQ(r1->machines.size(), 1u);
  EXPECT_EQ(r1->machines[0].host, "host-r0");
}

TEST_F(AgentRendezvousTest, UnrequestedRanksGoInArrivalOrder) {
  auto first = std::async(std::launch::async, [&] { return join(options(3, -1, 2)); });
  awaitRegistered(1);  // the first has its slot before the second starts
  auto second = std::async(std::launch::async, [&] { return join(options(3, -1, 2)); });
  awaitRegistered(2);
  auto master = join(options(3, 0, 2));
  auto r1 = first.get(), r2 = second.get();
  ASSERT_TRUE(master.ok() && r1.ok() && r2.ok());
  EXPECT_EQ(master->machine_rank, 0);
  EXPECT_EQ(r1->machine_rank, 1);
  EXPECT_EQ(r2->machine_rank, 2);
  EXPECT_EQ(r2->rank_offset, 4);
}

// A round of thousands names its first few missing machines and counts the rest (found at 2,048
// agents: every progress line listed them all).
TEST_F(AgentRendezvousTest, ManyMissingMachinesAreCountedNotListed) {
  auto o = options(20, 0, 1);
  o.timeouts.join = 300ms;
  auto r = join(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "rendezvous at " + o.store_address +
                           " timed out after 0.3 s: 1/20 machines joined; waiting for "
                           "machine_rank 1, 2, 3, 4, 5, 6, 7, 8 and 11 more");
}

TEST_F(AgentRendezvousTest, TimeoutNamesMissingMachines) {
  auto o = options(4, 0, 1);
  o.timeouts.join = 300ms;
  auto one = std::async(std::launch::async, [&] { return join(options(4, 2, 1)); });
  awaitRegistered(1);  // so that the master's count is 2/4, not 1/4
  auto r = join(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "rendezvous at " + o.store_address +
                           " timed out after 0.3 s: 2/4 machines joined; waiting for "
                           "machine_rank 1, 3");
  auto other = one.get();
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error(),
            "rendezvous failed: " + std::string("rendezvous at ") + o.store_address +
                " timed out after 0.3 s: 2/4 machines joined; waiting for machine_rank 1, 3")
      << "the master publishes why it gave up";
}

// --nnodes 2:4: a third machine registers and dies before the round closes (its presence key
// is no longer waited on). The round closes with the two that are there, at the last call,
// and the dead one is neither a member nor waited for.
TEST_F(AgentRendezvousTest, AMachineThatRegisteredAndDiedIsNotAMember) {
  auto elastic = [&](int requested) {
    GroupSettings o = options(4, requested, 2);
    o.min_machines = 2;
    o.timeouts.last_call = 300ms;
    o.presence = "agent-r" + std::to_string(requested);
    o.present = [](const std::string& token) { return token != "dead"; };
    return o;
  };
  // The dead one registered first (as a rendezvous() would), then vanished.
  auto c = client();
  const RoundKeys round0 = roundKeys(GroupSettings{}, 0);
  c->add(round0.arrivals(), 1);
  c->set(round0.agent(0),
         R"({"host":"gone","address":"","token":"dead","local_world_size":2,"requested_rank":-1})");
  auto other = std::async(std::launch::async, [&] { return join(elastic(-1)); });
  awaitRegistered(2);
  auto master = join(elastic(0));
  auto joined = other.get();
  ASSERT_TRUE(master.ok()) << master.error();
  ASSERT_TRUE(joined.ok()) << joined.error();
  ASSERT_EQ(master->machines.size(), 2u);
  EXPECT_EQ(master->world_size, 4);
  EXPECT_EQ(master->machines[0].host, "host-r0");
  EXPECT_EQ(master->machines[1].host, "host-r-1");
  EXPECT_EQ(master->machines[1].presence, "agent-r-1");  // the link watches it by this key
  EXPECT_FALSE(joined->spare);
  EXPECT_EQ(joined->machine_rank, 1);
}

// The master's reason reaches the others at once (they would wait out their join timeout, 60 s
// here, and the last call after it).
TEST_F(AgentRendezvousTest, MoreMachinesThanExpectedIsAnError) {
  auto o = options(2, -1, 1);
  o.timeouts.join = 60s;
  auto a = std::async(std::launch::async, [&] { return join(o); });
  auto b = std::async(std::launch::async, [&] { return join(o); });
  awaitRegistered(2);
  auto master = join(options(2, 0, 1));
  ASSERT_FALSE(master.ok());
  EXPECT_EQ(master.error(), "3 machines joined a rendezvous for 2 at " + o.store_address +
                                " (is another job using the same port?)");
  for (auto* other : {&a, &b}) {
    ASSERT_EQ(other->wait_for(10s), std::future_status::ready);
    auto r = other->get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), "rendezvous failed: " + master.error());
  }
}

TEST_F(AgentRendezvousTest, DuplicateRequestedRankIsAnError) {
  auto a = std::async(std::launch::async, [&] { return join(options(2, 0, 1)); });
  auto b = join(options(2, 0, 1));
  auto ra = a.get();
  ASSERT_FALSE(ra.ok() && b.ok());
  std::string message = !ra.ok() ? ra.error() : b.error();
  EXPECT_NE(message.find("two machines asked for machine_rank 0 (host-r0 and host-r0)"),
            std::string::npos)
      << message;
}

TEST_F(AgentRendezvousTest, ProgressIsReported) {
  auto o = options(2, 0, 1);
  o.timeouts.progress = 50ms;
  std::mutex m;
  std::vector<std::string> seen;
  std::promise<void> firstReport;
  o.progress = [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(m);
    seen.push_back(s);
    if (seen.size() == 1) firstReport.set_value();
  };
  auto master = std::async(std::launch::async, [&] { return join(o); });
  // The other machine joins only once the master has said it is missing.
  ASSERT_EQ(firstReport.get_future().wait_for(10s), std::future_status::ready);
  auto other = join(options(2, 1, 1));
  ASSERT_TRUE(master.get().ok());
  ASSERT_TRUE(other.ok()) << other.error();
  std::lock_guard<std::mutex> lock(m);
  ASSERT_FALSE(seen.empty());
  for (const auto& status : seen)
    EXPECT_EQ(status, "1/2 machines joined; waiting for machine_rank 1");
}

// The master's `othersGone` probe, counting its calls so a test can wait until the master is
// inside its exit-barrier loop.
class Polls {
 public:
  std::function<bool()> never() {
    return [this] {
      count();
      return false;
    };
  }
  std::function<bool()> untilGone() {
    return [this] {
      count();
      std::lock_guard<std::mutex> lock(m_);
      return gone_;
    };
  }
  void setGone() {
    std::lock_guard<std::mutex> lock(m_);
    gone_ = true;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(m_);
    return calls_;
  }
  bool awaitAtLeast(int n) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, 10s, [&] { return calls_ >= n; });
  }

 private:
  void count() {
    std::lock_guard<std::mutex> lock(m_);
    ++calls_;
    cv_.notify_all();
  }
  std::mutex m_;
  std::condition_variable cv_;
  int calls_ = 0;
  bool gone_ = false;
};

TEST_F(AgentRendezvousTest, ExitBarrierWaitsForEveryMachine) {
  auto o = options(2, 0, 1);
  auto a = client(), b = client();
  Polls polls;
  auto master = std::async(std::launch::async, [&] {
    return exitBarrier(*a, o, 0, o.num_machines, true, 5s, polls.never());
  });
  // The master is in its wait (it asked whether the others are gone, twice) before the other
  // reports.
  const bool waiting = polls.awaitAtLeast(2);
  // The other's count: the machines but the master that reported (the master counts itself).
  EXPECT_EQ(exitBarrier(*b, o, 0, o.num_machines, false, 5s, nullptr), 1);
  EXPECT_TRUE(waiting) << "the master never polled while the other machine was still running";
  EXPECT_EQ(master.get(), 2);
}

// A store whose first `slow` reads of a counter (add 0) get no reply in time, as a store serving
// thousands of agents at once may not answer; every other call goes through.
class SlowReads : public store::Store {
 public:
  SlowReads(store::Store& inner, int slow) : inner_(inner), slow_(slow) {}
  // Whether every slow read was made within 10 s (the master is in its barrier, looking).
  bool awaitSlowReads() {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, 10s, [this] { return slow_ == 0; });
  }
  void set(const std::string& k, const std::string& v) override { inner_.set(k, v); }
  std::string get(const std::string& k, std::chrono::milliseconds t) override {
    return inner_.get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override {
    {
      std::lock_guard lock(mutex_);
      if (d == 0 && slow_ > 0) {
        --slow_;
        cv_.notify_all();
        throw TimeoutError("add '" + k + "': no reply from the store");
      }
    }
    return inner_.add(k, d);
  }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return inner_.compareSet(k, e, d);
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    inner_.wait(k, t);
  }
  bool check(const std::vector<std::string>& k) override { return inner_.check(k); }
  bool deleteKey(const std::string& k) override { return inner_.deleteKey(k); }
  int64_t numKeys() override { return inner_.numKeys(); }

 private:
  store::Store& inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int slow_;  // guarded by mutex_
};

// The master's store did not answer two of its looks in time (found with 2,048 agent processes on
// 2 cores: the master stopped its store at once, "0/2048 machines reported"): it looks again and
// passes the barrier when the other reports, as if nothing had happened.
TEST_F(AgentRendezvousTest, ExitBarrierLooksAgainWhenItsStoreAnswersLate) {
  auto o = options(2, 0, 1);
  auto a = client(), b = client();
  SlowReads slow(*a, 2);
  auto master = std::async(std::launch::async, [&] {
    return exitBarrier(slow, o, 0, o.num_machines, true, 5s, nullptr);
  });
  // The other reports only after both looks went unanswered.
  EXPECT_TRUE(slow.awaitSlowReads()) << "the master gave up after a look its store did not answer";
  EXPECT_EQ(exitBarrier(*b, o, 0, o.num_machines, false, 5s, nullptr), 1);
  EXPECT_EQ(master.get(), 2);
}

TEST_F(AgentRendezvousTest, ExitBarrierStopsWaitingWhenTheOthersAreGone) {
  auto o = options(3, 0, 1);
  auto a = client();
  Polls polls;
  auto master = std::async(std::launch::async, [&] {
    return exitBarrier(*a, o, 0, o.num_machines, true, 5s, polls.untilGone());
  });
  EXPECT_TRUE(polls.awaitAtLeast(2));
  EXPECT_EQ(master.wait_for(0s),
            std::future_status::timeout);  // still waiting while the others live
  polls.setGone();                         // the other agents died without reporting
  const auto status = master.wait_for(10s);
  if (status !=
      std::future_status::ready) {  // let the master's thread end: the others report after all
    exitBarrier(*client(), o, 0, o.num_machines, false, 5s, nullptr);
    exitBarrier(*client(), o, 0, o.num_machines, false, 5s, nullptr);
  }
  ASSERT_EQ(status, std::future_status::ready);
  EXPECT_EQ(master.get(), 1);
}

TEST_F(AgentRendezvousTest, ExitBarrierAfterAFailureIsBounded) {
  auto o = options(2, 0, 1);
  auto a = client();
  JobFailure f;
  f.machine_rank = 1;
  EXPECT_FALSE(publishStop(*a, o, 0, RoundStop::failed(f)).has_value());  // the job's first
  const auto start = std::chrono::steady_clock::now();
  Polls polls;
  EXPECT_EQ(exitBarrier(*a, o, 0, o.num_machines, true, 200ms, polls.never()), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  // The other agents all gone after the failure: no reason to keep the store for them (a lost
  // machine never reports; waiting out the deadline kept the master ~15 s after its summary).
  EXPECT_FALSE(publishStop(*a, o, 1, RoundStop::failed(f)).has_value());
  int looks = 0;
  EXPECT_EQ(exitBarrier(*a, o, 1, o.num_machines, true, 60s, [&looks] { return ++looks > 0; }), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(looks, 1);
}

TEST_F(AgentRendezvousTest, OnlyTheFirstFailureIsPublished) {
  auto o = options(2, 0, 1);
  auto a = client(), b = client();
  JobFailure first, second;
  first.machine_rank = 1;
  first.rank = 3;
  first.exit_code = 7;
  first.stderr_tail = {"boom"};
  second.machine_rank = 0;
  second.rank = 0;
  EXPECT_FALSE(publishStop(*b, o, 0, RoundStop::failed(first)).has_value());
  auto winner = publishStop(*a, o, 0, RoundStop::failed(second));
  ASSERT_TRUE(winner.has_value() && winner->failure.has_value());
  EXPECT_EQ(winner->failure->rank, 3);
  EXPECT_EQ(winner->failure->exit_code, 7);
  EXPECT_EQ(winner->failure->stderr_tail, std::vector<std::string>{"boom"});
  EXPECT_FALSE(readStop(*b, o, 0, 1).has_value());  // machine 1's own
  EXPECT_EQ(readStop(*a, o, 0, 0)->failure->rank, 3);
  // The group's growth published later does not replace the failure (one record per round).
  auto stands = publishStop(*a, o, 0, RoundStop::growing(growthReason(2, 3)));
  ASSERT_TRUE(stands.has_value());
  EXPECT_FALSE(stands->isGrowth());
  EXPECT_EQ(stands->failure->rank, 3);
}

// The group's growth is a record of its own, no failure: every machine reads it as such (the
// publisher's own included, unlike its own failure), and it survives its encoding.
TEST_F(AgentRendezvousTest, TheGroupsGrowthIsNoFailure) {
  auto o = options(2, 0, 1);
  auto a = client(), b = client();
  EXPECT_FALSE(publishStop(*a, o, 0, RoundStop::growing(growthReason(2, 3))).has_value());
  JobFailure late;
  late.machine_rank = 1;
  late.rank = 2;
  auto first = publishStop(*b, o, 0, RoundStop::failed(late));
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->isGrowth());
  EXPECT_EQ(first->grows,
            "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to "
            "take it");
  for (int machine : {0, 1}) {
    auto heard = readStop(*a, o, 0, machine);
    ASSERT_TRUE(heard.has_value()) << machine;
    EXPECT_TRUE(heard->isGrowth()) << machine;
  }
  EXPECT_THROW(decodeRoundStop("not json"), nlohmann::json::exception);
}

}  // namespace
}  // namespace accel::launcher
