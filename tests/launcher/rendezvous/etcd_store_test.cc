// EtcdStore against a real etcd (a member of the test's own on loopback): the Store semantics
// the rounds rely on — waits that miss nothing, counts and swaps that agree across agents, keys
// kept apart per job — and a whole rendezvous of three agents run over it unchanged. Skipped,
// saying why, where etcd is not installed.

#include <atomic>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "accel/error.h"
#include "etcd_member.h"
#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/etcd/store.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class EtcdStoreTest : public testing::EtcdSuite {
 protected:
  // A store of job `job` (its own prefix); the test's name keeps tests apart.
  std::unique_ptr<EtcdStore> store(const std::string& job = "job") {
    EtcdOptions o;
    o.endpoints = *parseEtcdEndpoints(member_->endpoint());
    o.timeout = 5s;
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::make_unique<EtcdStore>(o, std::string("accel-test/") + test->name() + "/" + job);
  }
};

TEST_F(EtcdStoreTest, TheTcpStoresSemantics) {
  auto s = store(), other = store("other");
  s->set("k", "v");
  EXPECT_EQ(s->get("k", 1s), "v");
  EXPECT_EQ(s->add("n", 5), 5);
  EXPECT_EQ(s->add("n", -2), 3);
  EXPECT_EQ(s->add("n", 0), 3);
  EXPECT_EQ(s->compareSet("c", "", "first"), "first");        // absent, expected empty: set
  EXPECT_EQ(s->compareSet("c", "wrong", "second"), "first");  // no match: the value now
  EXPECT_EQ(s->compareSet("c", "first", "second"), "second");
  EXPECT_EQ(s->compareSet("absent", "x", "y"), "x");  // torch's answer for an absent key
  EXPECT_FALSE(s->check({"absent"}));
  EXPECT_TRUE(s->check({"k", "n", "c"}));
  EXPECT_EQ(s->numKeys(), 3);
  EXPECT_FALSE(other->check({"k"})) << "another job's key";
  EXPECT_EQ(other->numKeys(), 0);
  s->set("kk", "longer");
  EXPECT_TRUE(s->deleteKey("k"));
  EXPECT_FALSE(s->deleteKey("k"));
  EXPECT_TRUE(s->check({"kk"})) << "deleting k took a key that starts with it";
}

// A key written while another agent waits for it is seen, however the write and the watch
// interleave (the watch starts at the revision after the read that missed it); a key that never
// comes times out naming it.
TEST_F(EtcdStoreTest, WaitsMissNothingAndTimeOutNamingTheKeys) {
  for (int i = 0; i < 20; ++i) {
    auto waiter = store(), writer = store();
    const std::string key = "late/" + std::to_string(i);
    auto waited = std::async(std::launch::async, [&] { waiter->wait({"early", key}, 10s); });
    writer->set("early", "1");
    writer->set(key, "1");
    EXPECT_EQ(waited.wait_for(10s), std::future_status::ready) << i;
    waited.get();
  }
  auto s = store();
  try {
    s->wait({"early", "never", "nor"}, 300ms);
    FAIL() << "a wait for keys nobody writes returned";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "wait for never, nor timed out after 300 ms on etcd at " + member_->endpoint());
  }
}

// Agents on different machines count through one key: every add lands once.
TEST_F(EtcdStoreTest, AddsFromManyAgentsAllCount) {
  std::vector<std::thread> agents;
  std::atomic<int> maxSeen{0};
  for (int a = 0; a < 4; ++a) {
    agents.emplace_back([&] {
      auto s = store();
      for (int i = 0; i < 25; ++i) {
        const int now = static_cast<int>(s->add("count", 1));
        int seen = maxSeen.load();
        while (now > seen && !maxSeen.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (auto& t : agents) t.join();
  EXPECT_EQ(store()->add("count", 0), 100);
  EXPECT_EQ(maxSeen.load(), 100);
}

// The rounds' own rules, unchanged, over etcd: three agents (machine ranks by arrival, one asks
// for 0) meet in round 0 and agree on every placement.
TEST_F(EtcdStoreTest, ARendezvousRunsOverEtcdUnchanged) {
  std::vector<std::future<Expected<RendezvousResult>>> joined;
  for (int a = 0; a < 3; ++a) {
    joined.push_back(std::async(std::launch::async, [this, a] {
      GroupSettings o;
      o.run_id = "etcd";
      o.num_machines = o.min_machines = 3;
      o.max_restarts = 2;
      o.local_world_size = 2;
      o.host = o.presence = "host" + std::to_string(a);
      o.store_address = member_->endpoint();
      if (a == 0) o.requested_machine_rank = 0;
      auto s = store();
      return rendezvous(*s, o, RoundStart{});
    }));
  }
  std::vector<int> ranks;
  for (auto& f : joined) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->world_size, 6);
    EXPECT_EQ(r->size, 3);
    EXPECT_EQ(r->rank_offset, 2 * r->machine_rank);
    EXPECT_EQ(r->max_restarts, 2);
    ranks.push_back(r->machine_rank);
  }
  EXPECT_EQ(ranks[0], 0) << "the agent that asked for machine 0";
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace accel::launcher
