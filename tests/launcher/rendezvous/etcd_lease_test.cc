// EtcdLease against a real etcd (members of the test's own): a lease kept alive outlives its
// TTL; the lease's end takes its keys at once; etcd ending it, or etcd gone for the window,
// makes the agent's side say so, once. Skipped, saying why, where etcd is not installed.

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "etcd_member.h"
#include "launcher/rendezvous/etcd/lease.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class EtcdLeaseTest : public testing::EtcdSuite {
 protected:
  static EtcdOptions options(const std::string& endpoints) {
    EtcdOptions o;
    o.endpoints = *parseEtcdEndpoints(endpoints);
    o.timeout = 3s;
    o.attempt_timeout = 1s;
    return o;
  }
  // Renewals every `interval`, 3 of them the window.
  static RoundTimeouts every(std::chrono::milliseconds interval) {
    RoundTimeouts t;
    t.keep_alive_interval = interval;
    t.keep_alive_misses = 3;
    return t;
  }
  static std::string key() {
    return std::string("accel-test/") +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
};

TEST_F(EtcdLeaseTest, KeptAliveItOutlivesItsTtlAndItsEndTakesItsKeysAtOnce) {
  EtcdClient client(options(member_->endpoint()));
  auto lease = std::make_unique<EtcdLease>(realEtcd(), options(member_->endpoint()), every(200ms));
  EXPECT_EQ(lease->ttl(), 1s);  // 0.2 s x 3, in whole seconds
  const int64_t from = client.put(key(), "registered", lease->id()) + 1;
  // Nothing may delete the key for longer than its TTL (etcd may raise 1 s to its minimum, 2 s).
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  EtcdWatch watch(*parseEtcdEndpoints(member_->endpoint())->begin(), key(), false, from, deadline);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : watch.next(deadline)) EXPECT_FALSE(e.deleted) << "the lease expired";
  }
  EXPECT_FALSE(lease->lost());
  // The endpoint that took its renewals served within the last interval (the link asks it nothing
  // then); another was never asked.
  const auto answered = lease->answeredBy(member_->endpoint());
  ASSERT_TRUE(answered.has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - *answered, 1s);
  EXPECT_FALSE(lease->answeredBy("127.0.0.1:1").has_value());
  lease.reset();  // the job is over: revoked
  EXPECT_FALSE(client.get(key())) << "the key outlived its revoked lease";
}

// A lease that etcd no longer knows although this agent renewed it within its window was not
// lost to keep-alives: the agent says so (revoked here, as another program could).
TEST_F(EtcdLeaseTest, EtcdEndingTheLeaseIsLostOnceSayingWhy) {
  std::promise<void> told;
  int calls = 0;
  EtcdLease lease(realEtcd(), options(member_->endpoint()), every(100ms), [&](const std::string&) {
    if (++calls == 1) told.set_value();
  });
  EtcdClient(options(member_->endpoint())).revokeLease(lease.id());  // the others dropped it
  ASSERT_EQ(told.get_future().wait_for(5s), std::future_status::ready);
  const std::string lost = lease.lost().value_or("");
  EXPECT_EQ(lost.rfind("etcd no longer knows this agent's lease, renewed ", 0), 0u) << lost;
  EXPECT_NE(lost.find(" ago (revoked, or etcd's data was lost: wiped, or restored from an older "
                      "snapshot), so this machine is no longer in the job"),
            std::string::npos)
      << lost;
  EXPECT_EQ(calls, 1);
}

// etcd gone (its only member killed) loses nothing by itself: the workers do not need etcd, and
// only etcd can say the others dropped this machine. The agent says so once, after the window
// without a renewal, naming the endpoint — and nothing more while etcd stays away.
TEST_F(EtcdLeaseTest, EtcdGoneIsSaidOnceAndLosesNothingByItself) {
  std::string why;
  auto cluster = testing::EtcdCluster::start(1, why);
  if (!cluster) GTEST_SKIP() << why;
  std::promise<void> told;
  std::mutex mutex;
  std::vector<std::string> said;
  int lost = 0;
  const auto start = std::chrono::steady_clock::now();
  EtcdLease lease(
      realEtcd(), options(cluster->endpoint()), every(200ms),
      [&](const std::string&) {
        std::lock_guard lock(mutex);
        ++lost;
      },
      [&](const std::string& line) {
        std::lock_guard lock(mutex);
        said.push_back(line);
        if (said.size() == 1) told.set_value();
      });
  cluster->kill(0);
  ASSERT_EQ(told.get_future().wait_for(15s), std::future_status::ready);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1s) << "said before the window passed";
  std::this_thread::sleep_for(3s);  // what must not happen: a loss, or a second notice
  std::lock_guard lock(mutex);
  EXPECT_EQ(lost, 0);
  EXPECT_FALSE(lease.lost());
  EXPECT_TRUE(lease.outOfReach());
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("etcd is out of reach (no keep-alive landed for 1 s: ", 0), 0u)
      << said[0];
  EXPECT_NE(said[0].find(cluster->endpoint()), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("the workers go on"), std::string::npos) << said[0];
}

}  // namespace
}  // namespace accel::launcher
