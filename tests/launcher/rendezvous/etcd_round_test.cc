// meetOnEtcd against a real etcd (members of the test's own on loopback): agents as threads,
// each with a client and a lease of its own. Who is in a round and in which order, the last
// call, a spare, an agent whose lease ends before the round closes, two jobs on one etcd, and a
// round that goes on when the endpoint in use dies. Skipped, saying why, where etcd is not
// installed. The tests wait on etcd's events (a watch on the round's keys), never on sleeps.

#include <sys/eventfd.h>
#include <unistd.h>

#include <future>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "accel/error.h"
#include "etcd_member.h"
#include "launcher/rendezvous/etcd/meeting.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class EtcdRoundTest : public testing::EtcdSuite {
 protected:
  EtcdOptions options(const std::string& endpoints = "") const {
    EtcdOptions o;
    o.endpoints = *parseEtcdEndpoints(endpoints.empty() ? member_->endpoint() : endpoints);
    o.timeout = 5s;
    o.attempt_timeout = 1s;
    return o;
  }
  // The test's own root in etcd.
  static std::string root() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("accel-test/") + test->name() + "/";
  }
  // A meeting of MIN to MAX machines, its round's start at `start` (round 0 unless said).
  struct Setup {
    EtcdMeeting meeting;
    RoundStart start;
  };
  Setup settings(int min, int max, std::chrono::milliseconds lastCall,
                 const std::string& job = "job") const {
    Setup s;
    s.meeting.root = root();
    s.meeting.job.run_id = job;
    s.meeting.job.min_machines = min;
    s.meeting.job.num_machines = max;
    s.meeting.job.timeouts.last_call = lastCall;
    s.meeting.job.timeouts.join = 20s;
    return s;
  }
  static EtcdMember member(const std::string& name, int localWorldSize = 2) {
    return {name + "-token", name, "10.0.0." + std::to_string(name.size()), localWorldSize,
            29500 + static_cast<int>(name.size())};
  }

  // Agent `name` meets in round 0 on a thread of its own, with a lease of its own (kept in
  // leases_ by name).
  std::future<Expected<EtcdRound>> start(const std::string& name, Setup s, int localWorldSize = 2,
                                         const std::string& endpoints = "", int round = 0,
                                         int previousRank = -1) {
    EtcdClient leaser(options(endpoints));
    s.meeting.lease = leaser.grantLease(30s);
    leases_[name] = s.meeting.lease;
    s.start.round = round;
    const EtcdOptions o = options(endpoints);
    EtcdMember me = member(name, localWorldSize);
    me.previous_rank = previousRank;  // as EtcdRounds knows it from the round before
    return std::async(std::launch::async, [o, s, me] {
      EtcdClient client(o);
      return meetOnEtcd(client, s.meeting, s.start, me);
    });
  }

  // Blocks until `count` agents have registered in round 0 of `job` since the test began (puts
  // under its member keys, as a watch from the first revision sees them).
  void awaitRegistrations(int count, const std::string& job = "job",
                          const std::string& endpoint = "", int round = 0) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    EtcdWatch watch(*options(endpoint).endpoints.begin(),
                    etcdRoundKeys(settings(1, 1, 1s, job).meeting, round).memberPrefix(), true, 1,
                    deadline);
    int seen = 0;
    while (seen < count && std::chrono::steady_clock::now() < deadline) {
      for (const auto& e : watch.next(deadline)) seen += e.deleted ? 0 : 1;
    }
    ASSERT_GE(seen, count);
  }

  // Blocks until agent `name` is round 0's head (it created the head's key; at most 20 s).
  void awaitHead(const std::string& name) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    EtcdWatch watch(*options().endpoints.begin(),
                    etcdRoundKeys(settings(1, 1, 1s).meeting, 0).head(), false, 1, deadline);
    bool head = false;
    while (!head && std::chrono::steady_clock::now() < deadline) {
      for (const auto& e : watch.next(deadline)) head = head || e.kv.value == name + "-token";
    }
    ASSERT_TRUE(head) << name << " never became the head";
  }

  // The round's machines by rank, as its record's places hold them (every chunk: an agent reads
  // its own alone).
  std::vector<std::string> hosts(const EtcdRound& r, const std::string& endpoints = "") {
    std::map<int, std::string> byRank;
    if (r.places.empty()) return {};
    for (const auto& kv : EtcdClient(options(endpoints)).getPrefix(r.places)) {
      for (const auto& p : nlohmann::json::parse(kv.value)) byRank[p.at("rank")] = p.at("host");
    }
    std::vector<std::string> h;
    for (const auto& [rank, host] : byRank) {
      EXPECT_EQ(rank, static_cast<int>(h.size())) << "a gap in the places";
      h.push_back(host);
    }
    return h;
  }

  std::map<std::string, int64_t> leases_;
};

TEST_F(EtcdRoundTest, AFullRoundClosesAtOnceInArrivalOrder) {
  const auto s = settings(3, 3, 60s);  // a last call that would be seen: MAX closes at once
  auto a = start("alpha", s, 2);
  awaitRegistrations(1);
  auto b = start("beta", s, 1);
  awaitRegistrations(2);
  auto c = start("gamma", s, 3);
  std::map<std::string, EtcdRound> got;
  for (auto [name, f] : {std::pair{"alpha", &a}, {"beta", &b}, {"gamma", &c}}) {
    auto r = f->get();
    ASSERT_TRUE(r.ok()) << r.error();
    got[name] = *r;
  }
  const std::vector<std::string> order{"alpha", "beta", "gamma"};
  EXPECT_EQ(got["alpha"].machine_rank, 0);
  EXPECT_EQ(got["beta"].machine_rank, 1);
  EXPECT_EQ(got["gamma"].machine_rank, 2);
  EXPECT_EQ(got["alpha"].rank_offset, 0);
  EXPECT_EQ(got["beta"].rank_offset, 2);
  EXPECT_EQ(got["gamma"].rank_offset, 3);
  for (const auto& [name, r] : got) {
    EXPECT_EQ(hosts(r), order) << name;
    EXPECT_EQ(r.world_size, 6) << name;
    EXPECT_EQ(r.closed_at, got["alpha"].closed_at) << name << ": one record";
    ASSERT_GE(r.members.size(), 2u) << name << ": machines 0 and 1 are in the summary";
    EXPECT_EQ(r.members[0].host, "alpha") << name;
    EXPECT_EQ(r.members[1].address, "10.0.0.4") << name;
    EXPECT_EQ(r.members[1].store_port, 29504) << name;
    EXPECT_EQ(r.size, 3) << name;
  }
  EXPECT_EQ(got["alpha"].members.size(), 3u) << "alpha closed the round: it knows every member";
  EXPECT_EQ(got["gamma"].members.size(), 2u) << "gamma read the summary and its own chunk";
}

TEST_F(EtcdRoundTest, TheLastCallClosesWithMinAndALaterArrivalIsASpare) {
  const auto s = settings(2, 3, 300ms);
  auto a = start("alpha", s);
  auto b = start("beta", s);
  auto ra = a.get(), rb = b.get();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->size, 2);
  EXPECT_EQ(ra->closed_at, rb->closed_at);
  EXPECT_EQ(ra->machine_rank + rb->machine_rank, 1);
  auto late = start("gamma", s).get();
  ASSERT_TRUE(late.ok()) << late.error();
  EXPECT_EQ(late->machine_rank, -1) << "the round had closed: a spare";
  EXPECT_EQ(hosts(*late), hosts(*ra));
}

// Issue 52: no agent but the head hears of every other. Eight agents come one by one: one (the
// head, which created the head's key) follows every registration through one watch and closes the
// round; each other one opens one watch — the record's keys — and reads the summary and its own
// chunk.
TEST_F(EtcdRoundTest, OnlyTheHeadFollowsEveryRegistration) {
  const auto s = settings(8, 8, 60s);
  std::vector<std::future<Expected<EtcdRound>>> agents;
  for (int i = 0; i < 8; ++i) {
    agents.push_back(start("host" + std::to_string(i), s));
    awaitRegistrations(i + 1);
  }
  int heads = 0;
  for (int i = 0; i < 8; ++i) {
    auto r = agents[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->machine_rank, i);
    EXPECT_EQ(r->rank_offset, 2 * i) << "two processes each";
    EXPECT_EQ(r->size, 8);
    if (r->members.size() == 8u) {
      ++heads;
      EXPECT_EQ(r->watches, 1) << i;
    } else {
      EXPECT_EQ(r->members.size(), 2u) << i << ": machines 0 and 1, from the summary";
      EXPECT_LE(r->watches, 1) << i << " (none when the record was made as it registered)";
    }
  }
  EXPECT_EQ(heads, 1);
}

// The head dies before the round is complete: its registration and its head's key go with its
// lease, another agent becomes the head, and the round closes without the dead one.
TEST_F(EtcdRoundTest, WhenTheHeadDiesAnotherClosesTheRound) {
  const auto s = settings(3, 3, 60s);
  auto dying = s;
  const int stop = ::eventfd(0, EFD_CLOEXEC);
  dying.meeting.cancel_fd = stop;
  auto doomed = start("doomed", dying);
  awaitHead("doomed");
  auto a = start("alpha", s);
  awaitRegistrations(2);
  // The head's process died: it does nothing more, and etcd ends its lease.
  const uint64_t one = 1;
  ASSERT_EQ(::write(stop, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  EXPECT_FALSE(doomed.get().ok());
  EtcdClient(options()).revokeLease(leases_["doomed"]);
  auto b = start("beta", s);
  awaitRegistrations(3);
  auto c = start("gamma", s);
  auto ra = a.get(), rb = b.get(), rc = c.get();
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  EXPECT_EQ(hosts(*ra), (std::vector<std::string>{"alpha", "beta", "gamma"}));
  EXPECT_EQ((ra->members.size() == 3u) + (rb->members.size() == 3u) + (rc->members.size() == 3u), 1)
      << "one of them became the head and closed the round";
  EXPECT_EQ(rc->machine_rank, 2);
  ::close(stop);
}

// Issue 33's "joins and then dies" on etcd: its registration goes with its lease, so the round
// neither waits for it nor takes it.
TEST_F(EtcdRoundTest, AnAgentWhoseLeaseEndsBeforeTheCloseIsNotInTheRound) {
  const auto s = settings(2, 3, 1s);
  auto a = start("alpha", s);
  auto doomed = start("doomed", s);
  awaitRegistrations(2);
  EtcdClient(options()).revokeLease(leases_["doomed"]);  // its process died; etcd ends it
  auto b = start("beta", s);
  auto ra = a.get(), rb = b.get(), rd = doomed.get();
  ASSERT_TRUE(ra.ok() && rb.ok() && rd.ok());
  EXPECT_EQ(hosts(*ra), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(rb->machine_rank, 1);
  EXPECT_EQ(rd->machine_rank, -1);
}

// After a restart the machines of the round before keep their places (machine 0 stays machine
// 0), whatever the order in which they come back; a newcomer comes after them, though it
// registered first.
TEST_F(EtcdRoundTest, TheMachinesOfTheRoundBeforeKeepTheirPlaces) {
  auto a = start("alpha", settings(2, 2, 60s));
  awaitRegistrations(1);
  auto b = start("beta", settings(2, 2, 60s));
  ASSERT_EQ(hosts(*a.get()), (std::vector<std::string>{"alpha", "beta"}));
  ASSERT_TRUE(b.get().ok());
  const auto again = settings(3, 3, 60s);
  auto c = start("gamma", again, 2, "", 1);
  awaitRegistrations(1, "job", "", 1);
  auto b1 = start("beta", again, 2, "", 1, 1);
  awaitRegistrations(2, "job", "", 1);
  auto a1 = start("alpha", again, 2, "", 1, 0);
  auto r = a1.get();
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(hosts(*r), (std::vector<std::string>{"alpha", "beta", "gamma"}));
  EXPECT_EQ(r->machine_rank, 0);
  EXPECT_EQ(c.get()->machine_rank, 2);
  EXPECT_EQ(b1.get()->machine_rank, 1);
}

// After a restart the survivors' round closes once the machines the decision expects are back,
// without a last call, and carries the restart count.
TEST_F(EtcdRoundTest, ARestartsRoundClosesWithTheExpectedMachinesAndCarriesItsCount) {
  auto s = settings(2, 3, 60s);  // without the expectation: closed by the last call, 60 s on
  s.meeting.job.timeouts.join = 60s;
  s.start.expect_machines = 2;
  s.start.restart_count = 1;
  auto a = start("alpha", s);
  auto b = start("beta", s);
  ASSERT_EQ(a.wait_for(15s), std::future_status::ready) << "it waited for the last call";
  auto ra = a.get(), rb = b.get();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->size, 2);
  EXPECT_EQ(ra->restart_count, 1);
  EXPECT_EQ(rb->restart_count, 1);
}

TEST_F(EtcdRoundTest, AJobThatEndsTellsTheAgentsWaitingInItsNextRound) {
  const auto s = settings(2, 2, 60s);
  auto spare = start("spare", s);
  awaitRegistrations(1);
  EtcdClient client(options());
  closeEtcdRound(client, s.meeting, 0, "the job finished");
  auto r = spare.get();
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->closed, "the job finished");
  EXPECT_EQ(r->machine_rank, -1);
  EXPECT_TRUE(r->members.empty());
}

TEST_F(EtcdRoundTest, TwoJobsOnOneEtcdNeverMeet) {
  auto a1 = start("a1", settings(2, 2, 1s, "A"));
  auto b1 = start("b1", settings(2, 2, 1s, "B"));
  auto a2 = start("a2", settings(2, 2, 1s, "A"));
  auto ra1 = a1.get(), ra2 = a2.get();
  ASSERT_TRUE(ra1.ok() && ra2.ok());
  EXPECT_EQ(hosts(*ra1), hosts(*ra2));
  EXPECT_EQ(ra1->size, 2);
  Setup shortJoin = settings(2, 2, 1s, "B");
  shortJoin.meeting.job.timeouts.join = 500ms;
  EtcdClient client(options());
  auto b2 = meetOnEtcd(client, shortJoin.meeting, shortJoin.start, member("b2"));
  // b2 and b1 are job B's: they meet (b1 waited), and never with job A's.
  ASSERT_TRUE(b2.ok()) << b2.error();
  EXPECT_EQ(hosts(*b2), (std::vector<std::string>{"b1", "b2"}));
  auto rb1 = b1.get();
  ASSERT_TRUE(rb1.ok());
  EXPECT_EQ(rb1->closed_at, b2->closed_at);
}

TEST_F(EtcdRoundTest, TooFewMachinesFailNamingTheRoundEtcdAndWhoCame) {
  Setup s = settings(3, 3, 1s);
  s.meeting.job.timeouts.join = 400ms;
  EtcdClient client(options());
  auto r = meetOnEtcd(client, s.meeting, s.start, member("alpha"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "round 0 on etcd at " + member_->endpoint() +
                           ": 1 of 3 machines joined within 0.4 s (alpha)");
}

// A cluster of three: the member the agents use is killed between two registrations; the first
// agent's watch ends, it reads the round again through another member, and the round closes.
TEST_F(EtcdRoundTest, TheRoundGoesOnWhenTheEndpointInUseDies) {
  std::string why;
  auto cluster = testing::EtcdCluster::start(3, why);
  if (!cluster) GTEST_SKIP() << why;
  const auto s = settings(2, 2, 60s);
  auto a = start("alpha", s, 2, cluster->endpoints());
  awaitRegistrations(1, "job", cluster->endpoint(1));
  cluster->kill(0);  // the first endpoint: every client's first choice
  auto b = start("beta", s, 2, cluster->endpoint(1) + "," + cluster->endpoint(2));
  auto ra = a.get(), rb = b.get();
  ASSERT_TRUE(ra.ok()) << ra.error();
  ASSERT_TRUE(rb.ok()) << rb.error();
  EXPECT_EQ(hosts(*ra, cluster->endpoint(1)), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(ra->closed_at, rb->closed_at);
}

// The endpoint alpha watches goes silent (SIGSTOP: open connections, no reply — a machine cut
// off) while the round forms: alpha's watch is checked, found silent, and the round is read and
// watched through another member, so alpha sees beta's registration (or the record) and meets it.
TEST_F(EtcdRoundTest, TheRoundGoesOnWhenTheWatchedEndpointGoesSilent) {
  std::string why;
  auto cluster = testing::EtcdCluster::start(3, why);
  if (!cluster) GTEST_SKIP() << why;
  auto s = settings(2, 2, 60s);
  s.meeting.job.timeouts.keep_alive_interval = 500ms;
  auto a = start("alpha", s, 2, cluster->endpoints());
  awaitRegistrations(1, "job", cluster->endpoint(1));
  cluster->pause(0);  // the first endpoint: the one alpha watches
  auto b = start("beta", s, 2, cluster->endpoint(1) + "," + cluster->endpoint(2));
  auto ra = a.get(), rb = b.get();
  cluster->resume(0);
  ASSERT_TRUE(ra.ok()) << ra.error();
  ASSERT_TRUE(rb.ok()) << rb.error();
  EXPECT_EQ(hosts(*ra, cluster->endpoint(1)), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(ra->closed_at, rb->closed_at);
}

}  // namespace
}  // namespace accel::launcher
