// EtcdLease against a real etcd (members of the test's own): a lease kept alive outlives its
// TTL; the lease's end takes its keys at once; etcd ending it, or etcd gone for the window,
// makes the agent's side say so, once. Skipped, saying why, where etcd is not installed.

#include "launcher/rendezvous/etcd_lease.h"

#include <future>

#include <gtest/gtest.h>

#include "etcd_member.h"

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
  static std::string key() {
    return std::string("accel-test/") +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
};

TEST_F(EtcdLeaseTest, KeptAliveItOutlivesItsTtlAndItsEndTakesItsKeysAtOnce) {
  EtcdClient client(options(member_->endpoint()));
  auto lease = std::make_unique<EtcdLease>(realEtcd(), options(member_->endpoint()), 200ms, 3);
  EXPECT_EQ(lease->ttl(), 1s);  // 0.2 s x 3, in whole seconds
  const int64_t from = client.put(key(), "registered", lease->id()) + 1;
  // Nothing may delete the key for longer than its TTL (etcd may raise 1 s to its minimum, 2 s).
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  EtcdWatch watch(*parseEtcdEndpoints(member_->endpoint())->begin(), key(), false, from, deadline);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : watch.next(deadline)) EXPECT_FALSE(e.deleted) << "the lease expired";
  }
  EXPECT_FALSE(lease->lost());
  lease.reset();  // the job is over: revoked
  EXPECT_FALSE(client.get(key())) << "the key outlived its revoked lease";
}

TEST_F(EtcdLeaseTest, EtcdEndingTheLeaseIsLostOnceSayingWhy) {
  std::promise<void> told;
  int calls = 0;
  EtcdLease lease(realEtcd(), options(member_->endpoint()), 100ms, 3, [&](const std::string&) {
    if (++calls == 1) told.set_value();
  });
  EtcdClient(options(member_->endpoint())).revokeLease(lease.id());  // the others dropped it
  ASSERT_EQ(told.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(lease.lost().value_or(""),
            "etcd ended this agent's lease: no keep-alive reached it for 1 s, so the other "
            "machines dropped this one");
  EXPECT_EQ(calls, 1);
}

TEST_F(EtcdLeaseTest, EtcdGoneForTheWindowIsLostNamingIt) {
  std::string why;
  auto cluster = testing::EtcdCluster::start(1, why);
  if (!cluster) GTEST_SKIP() << why;
  std::promise<void> told;
  const auto start = std::chrono::steady_clock::now();
  EtcdLease lease(realEtcd(), options(cluster->endpoint()), 200ms, 3,
                  [&](const std::string&) { told.set_value(); });
  cluster->kill(0);
  ASSERT_EQ(told.get_future().wait_for(15s), std::future_status::ready);
  // The window (1 s) and the time etcd may take to elect a leader (5 s), not the window alone.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 6s) << "lost before etcd could elect";
  const std::string lost = lease.lost().value_or("");
  EXPECT_EQ(lost.rfind("etcd was not reached for 6 s (the keep-alive window, 1 s, and 5 s for etcd "
                       "to elect a leader): ",
                       0),
            0u)
      << lost;
  EXPECT_NE(lost.find(cluster->endpoint()), std::string::npos) << lost;
}

}  // namespace
}  // namespace accel::launcher
