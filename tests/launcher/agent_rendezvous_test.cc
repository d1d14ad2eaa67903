// Agents as threads, rendezvousing through a real store server on loopback.

#include "launcher/agent_rendezvous.h"

#include <atomic>
#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/tcp_store_server.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class AgentRendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = store::TcpStoreServer::start({}); }

  RendezvousOptions options(int machines, int requested, int localWorldSize) {
    RendezvousOptions o;
    o.num_machines = machines;
    o.requested_machine_rank = requested;
    o.local_world_size = localWorldSize;
    o.host = "host-r" + std::to_string(requested);
    o.store_address = "127.0.0.1:" + std::to_string(server_->port());
    o.timeout = 5s;
    return o;
  }

  // A client of the test's store (one per thread: clients are not thread-safe).
  std::unique_ptr<store::TcpStoreClient> client() {
    store::TcpStoreClientOptions c;
    c.port = server_->port();
    return std::make_unique<store::TcpStoreClient>(c);
  }

  Expected<RendezvousResult> join(RendezvousOptions o) { return rendezvous(*client(), o); }

  std::unique_ptr<store::TcpStoreServer> server_;
};

TEST_F(AgentRendezvousTest, RequestedRanksAndOffsets) {
  // Machines of different sizes join in an order unrelated to their ranks.
  auto m2 = std::async(std::launch::async, [&] { return join(options(3, 2, 4)); });
  auto m1 = std::async(std::launch::async, [&] { return join(options(3, 1, 2)); });
  auto m0 = std::async(std::launch::async, [&] { return join(options(3, 0, 1)); });
  auto r0 = m0.get(), r1 = m1.get(), r2 = m2.get();
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
  ASSERT_EQ(r1->machines.size(), 3u);
  EXPECT_EQ(r1->machines[2].host, "host-r2");
}

TEST_F(AgentRendezvousTest, UnrequestedRanksGoInArrivalOrder) {
  auto first = std::async(std::launch::async, [&] { return join(options(3, -1, 2)); });
  std::this_thread::sleep_for(100ms);  // arrives first
  auto second = std::async(std::launch::async, [&] { return join(options(3, -1, 2)); });
  std::this_thread::sleep_for(100ms);
  auto master = join(options(3, 0, 2));
  auto r1 = first.get(), r2 = second.get();
  ASSERT_TRUE(master.ok() && r1.ok() && r2.ok());
  EXPECT_EQ(r1->machine_rank, 1);
  EXPECT_EQ(r2->machine_rank, 2);
  EXPECT_EQ(r2->rank_offset, 4);
}

TEST_F(AgentRendezvousTest, TimeoutNamesMissingMachines) {
  auto o = options(4, 0, 1);
  o.timeout = 300ms;
  auto one = std::async(std::launch::async, [&] { return join(options(4, 2, 1)); });
  auto r = join(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "rendezvous at " + o.store_address + " timed out after 0.3 s: 2/4 machines joined; waiting for "
                       "machine_rank 1, 3");
  auto other = one.get();
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error(), "rendezvous failed: " + std::string("rendezvous at ") + o.store_address +
                               " timed out after 0.3 s: 2/4 machines joined; waiting for machine_rank 1, 3")
      << "the master publishes why it gave up";
}

TEST_F(AgentRendezvousTest, DuplicateRequestedRankIsAnError) {
  auto a = std::async(std::launch::async, [&] { return join(options(2, 0, 1)); });
  auto b = join(options(2, 0, 1));
  auto ra = a.get();
  ASSERT_FALSE(ra.ok() && b.ok());
  std::string message = !ra.ok() ? ra.error() : b.error();
  EXPECT_NE(message.find("two machines asked for machine_rank 0 (host-r0 and host-r0)"), std::string::npos) << message;
}

TEST_F(AgentRendezvousTest, ProgressIsReported) {
  auto o = options(2, 0, 1);
  o.progress_interval = 50ms;
  std::mutex m;
  std::vector<std::string> seen;
  o.progress = [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(m);
    seen.push_back(s);
  };
  auto master = std::async(std::launch::async, [&] { return join(o); });
  std::this_thread::sleep_for(200ms);
  auto other = join(options(2, 1, 1));
  ASSERT_TRUE(master.get().ok());
  ASSERT_TRUE(other.ok()) << other.error();
  std::lock_guard<std::mutex> lock(m);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), "1/2 machines joined; waiting for machine_rank 1");
}

TEST_F(AgentRendezvousTest, ExitBarrierWaitsForEveryMachine) {
  auto o = options(2, 0, 1);
  auto a = client(), b = client();
  auto master = std::async(std::launch::async, [&] { return exitBarrier(*a, o, true, 5s, [] { return false; }); });
  EXPECT_EQ(master.wait_for(100ms), std::future_status::timeout);  // no deadline while the others live
  EXPECT_EQ(exitBarrier(*b, o, false, 5s, nullptr), 2);
  EXPECT_EQ(master.get(), 2);
}

TEST_F(AgentRendezvousTest, ExitBarrierStopsWaitingWhenTheOthersAreGone) {
  auto o = options(3, 0, 1);
  auto a = client();
  std::atomic<bool> gone{false};
  auto master = std::async(std::launch::async, [&] { return exitBarrier(*a, o, true, 5s, [&] { return gone.load(); }); });
  EXPECT_EQ(master.wait_for(100ms), std::future_status::timeout);
  gone = true;  // the other agents died without reporting
  ASSERT_EQ(master.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(master.get(), 1);
}

TEST_F(AgentRendezvousTest, ExitBarrierAfterAFailureIsBounded) {
  auto o = options(2, 0, 1);
  auto a = client();
  JobFailure f;
  f.machine_rank = 1;
  EXPECT_FALSE(publishFailure(*a, o, f).has_value());  // the job's first failure
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(exitBarrier(*a, o, true, 200ms, [] { return false; }), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
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
  EXPECT_FALSE(publishFailure(*b, o, first).has_value());
  auto winner = publishFailure(*a, o, second);
  ASSERT_TRUE(winner.has_value());
  EXPECT_EQ(winner->rank, 3);
  EXPECT_EQ(winner->exit_code, 7);
  EXPECT_EQ(winner->stderr_tail, std::vector<std::string>{"boom"});
  EXPECT_FALSE(readFailure(*b, o, 1).has_value());  // machine 1's own
  EXPECT_EQ(readFailure(*a, o, 0)->rank, 3);
}

}  // namespace
}  // namespace accel::launcher
