// EtcdLink against a real etcd: three machines' links of one round, each agent with a lease of
// its own. A worker's failure reaches every link once; a member whose lease ends is found lost by
// the others, machine 0 as any other; an arrival in the next round grows the group; an agent's
// own lease lost ends the job there. Skipped, saying why, where etcd is not installed.

#include <poll.h>

#include <atomic>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "etcd_member.h"
#include "launcher/rendezvous/etcd/client/http_connection.h"
#include "launcher/rendezvous/etcd/link.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

class EtcdLinkTest : public testing::EtcdSuite {
 protected:
  EtcdOptions etcd() const {
    EtcdOptions o;
    o.endpoints = *parseEtcdEndpoints(member_->endpoint());
    o.timeout = 3s;
    o.attempt_timeout = 1s;
    return o;
  }
  EtcdMeeting round() const {
    EtcdMeeting s;
    s.root = std::string("accel-test/") +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
    s.job.run_id = "job";
    s.job.min_machines = 2;
    s.job.num_machines = max_;
    return s;
  }

  // Machines alpha, beta, gamma registered in round 0 (each under a lease of its own), each
  // having taken its place (the key EtcdRounds::watch puts once the round formed), and a link for
  // each.
  void SetUp() override {
    EtcdSuite::SetUp();
    if (IsSkipped()) return;
    EtcdClient client(etcd());
    std::vector<int64_t> arrivals;
    for (const std::string name : {"alpha", "beta", "gamma"}) {
      const int64_t lease = client.grantLease(30s);
      leases_.push_back(lease);
      members_.push_back({name + "-token", name, "", 1});
      arrivals.push_back(client.put(etcdRoundKeys(round(), 0).member(members_.back().token),
                                    etcdRegistration(members_.back()), lease));
      client.put(etcdRoundKeys(round(), 0).started(static_cast<int>(members_.size()) - 1), "1");
    }
    places_ = etcdRoundKeys(round(), 0).placesBy("alpha-token");
    putEtcdPlaces(client, places_, members_, arrivals);
    seen_at_ = client.revision();
    makeLinks();
  }
  EtcdLinkOptions linkOptions(int m) const {
    EtcdLinkOptions o;
    o.etcd = etcd();
    o.meeting = round();
    o.machine_rank = m;
    o.machines = 3;
    o.places = places_;
    o.seen_at = seen_at_;
    return o;
  }
  void makeLinks() {
    links_.clear();
    for (int m = 0; m < 3; ++m) links_.push_back(std::make_unique<EtcdLink>(linkOptions(m)));
  }

  // The next events of machine `m`'s link (at most 10 s).
  std::vector<LinkEvent> events(int m) {
    pollfd p{links_[static_cast<size_t>(m)]->fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1) << "machine " << m << ": no event";
    return links_[static_cast<size_t>(m)]->takeEvents();
  }

  // Whether the member comes to count exactly `n` watches (etcd's own gauge) within 10 s (it
  // counts a watch gone once the cancel reached it).
  bool watchersBecome(int64_t n) {
    double seen = -1;
    for (int i = 0; i < 200; ++i) {
      seen = metric("etcd_debugging_mvcc_watcher_total");
      if (seen == static_cast<double>(n)) return true;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "etcd counts " << seen << " watches, not " << n;
    return false;
  }

  int max_ = 3;
  std::vector<int64_t> leases_;
  std::vector<EtcdMember> members_;
  std::string places_;  // the round's record's, as its head would write them
  int64_t seen_at_ = 0;
  std::vector<std::unique_ptr<EtcdLink>> links_;
};

TEST_F(EtcdLinkTest, AFailureReachesEveryLinkOnce) {
  JobFailure mine;
  mine.machine_rank = 1;
  mine.host = "beta";
  mine.rank = 1;
  mine.exit_code = 7;
  ASSERT_TRUE(links_[1]->publish(mine));
  EXPECT_FALSE(links_[1]->publish(mine)) << "only the first publication counts";
  auto own = events(1);
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].kind, LinkEvent::Kind::kPublishedFirst);
  for (int m : {0, 2}) {
    auto e = events(m);
    ASSERT_EQ(e.size(), 1u) << m;
    EXPECT_EQ(e[0].kind, LinkEvent::Kind::kRemoteFailure) << m;
    EXPECT_EQ(e[0].failure.exit_code, 7) << m;
    EXPECT_EQ(e[0].failure.host, "beta") << m;
  }
}

TEST_F(EtcdLinkTest, MachineZeroWhoseLeaseEndsIsLostToTheOthers) {
  EtcdClient(etcd()).revokeLease(leases_[0]);  // alpha's agent is gone
  for (int m : {1, 2}) {
    auto e = events(m);
    ASSERT_EQ(e.size(), 1u) << m;
    EXPECT_EQ(e[0].kind, LinkEvent::Kind::kRemoteFailure) << m;
    EXPECT_EQ(e[0].failure.machine_rank, 0) << m;
    EXPECT_EQ(e[0].failure.cause, kCauseLost) << m;
    EXPECT_EQ(e[0].failure.reason,
              "lost: its lease ended (no keep-alive reached etcd for 3 s, or etcd revoked it)")
        << m;
    const auto lost = links_[static_cast<size_t>(m)]->lostMachines();
    ASSERT_EQ(lost.size(), 1u) << m;
    EXPECT_EQ(lost[0].machine, 0) << m;
  }
}

// Links that start after a member's registration went (after the round's record was made) judge
// it from the record's revision on: lost, unless it said it finished. The watch brings gamma's
// end before beta's, so once beta's loss is told gamma's was judged.
TEST_F(EtcdLinkTest, AMachineThatFinishedIsNotLostAndOneThatDidNotIs) {
  EtcdClient client(etcd());
  client.put(etcdRoundKeys(round(), 0).finished(2), "1");
  client.revokeLease(leases_[2]);
  client.revokeLease(leases_[1]);
  makeLinks();
  auto e = events(0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, LinkEvent::Kind::kRemoteFailure);
  EXPECT_EQ(e[0].failure.machine_rank, 1);
  ASSERT_EQ(links_[0]->lostMachines().size(), 1u) << "gamma, which finished, was taken for lost";
  EXPECT_EQ(links_[0]->lostMachines()[0].machine, 1);
  auto stop = client.get(etcdRoundKeys(round(), 0).stop());
  ASSERT_TRUE(stop);
  EXPECT_EQ(failureFromJson(nlohmann::json::parse(stop->value)).host, "beta");
}

class EtcdLinkWithRoomTest : public EtcdLinkTest {
 protected:
  EtcdLinkWithRoomTest() { max_ = 4; }
};

TEST_F(EtcdLinkWithRoomTest, AnArrivalGrowsTheGroupAndIsNoFailure) {
  EtcdClient client(etcd());
  client.put(etcdRoundKeys(round(), 1).member("delta-token"), "{}");
  for (int m : {0, 1, 2}) {
    auto e = events(m);
    ASSERT_EQ(e.size(), 1u) << m;
    EXPECT_EQ(e[0].kind, LinkEvent::Kind::kGroupGrows) << m;
    EXPECT_EQ(e[0].grows,
              "a machine is waiting to join (the group has 3 of at most 4): the group re-forms "
              "to take it")
        << m;
  }
}

// A link reads the round when it starts: a machine registered for the next round by then is
// judged before the constructor returns.
TEST_F(EtcdLinkTest, AnArrivalIntoAFullGroupStopsNothing) {
  EtcdClient client(etcd());
  client.put(etcdRoundKeys(round(), 1).member("delta-token"), "{}");  // a spare
  makeLinks();
  EXPECT_FALSE(client.get(etcdRoundKeys(round(), 0).stop())) << "the spare stopped the round";
}

TEST_F(EtcdLinkTest, ThisAgentsLeaseLostEndsTheJobHere) {
  links_[2]->leaseLost("etcd was not reached for 3 s");
  auto e = events(2);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, LinkEvent::Kind::kRemoteFailure);
  EXPECT_EQ(e[0].failure.reason, "etcd was not reached for 3 s");
}

// The member every link watches through goes silent (SIGSTOP: its connections open, no reply,
// no reset — a machine cut off); a machine whose lease then ends is still found lost, through
// another member, within a few of the link's checks. (Found on network-namespace hosts: machine
// 0's host cut off, and with it the etcd member every agent watched; the others took 70 s.)
// A stopped link stays until the next round replaces it; its watches close at once — else its
// watch of the next round's registrations brings every agent every arrival while the group
// re-forms (N events per agent).
TEST_F(EtcdLinkTest, AStoppedLinkClosesItsWatches) {
  EXPECT_TRUE(watchersBecome(9));  // three links, three watches each
  links_[0]->stop();
  EXPECT_TRUE(watchersBecome(6));
  EXPECT_TRUE(links_[0]->lostMachines().empty());
}

// Renewals of the agent's lease that reached the watches' endpoint within the interval show it
// serves: the link asks it nothing then (etcd's count of reads stays), and asks every interval
// when they did not.
TEST_F(EtcdLinkTest, RenewalsThatReachTheWatchedEndpointSpareItsQuestions) {
  links_.clear();
  for (const bool renewed : {true, false}) {
    std::atomic<int> looked{0};
    EtcdLinkOptions o = linkOptions(0);
    o.meeting.job.timeouts.keep_alive_interval = 200ms;
    o.answered = [&, clock = o.meeting.job.clock](const std::string& endpoint) {
      EXPECT_EQ(endpoint, member_->endpoint());
      ++looked;
      return renewed ? std::optional<Clock::time_point>(clock->now()) : std::nullopt;
    };
    EtcdLink link(o);  // (it reads the stop record as it starts)
    const double before = metric("etcd_mvcc_range_total");
    for (int i = 0; i < 1000 && looked < 4; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_GE(looked, 4) << "the link never came to look";
    const double asked = metric("etcd_mvcc_range_total") - before;
    link.stop();
    if (renewed) {
      EXPECT_EQ(asked, 0) << "the link asked an endpoint the lease's renewals reached";
    } else {
      EXPECT_GE(asked, 3) << "without renewals the link asks every interval";
    }
  }
}

TEST(EtcdLinkSilenceTest, AWatchedMemberThatGoesSilentIsLeft) {
  std::string why;
  auto cluster = testing::EtcdCluster::start(3, why);
  if (!cluster) GTEST_SKIP() << why;
  EtcdMeeting round;
  round.root = "accel-test/silence/";
  round.job.run_id = "job";
  round.job.min_machines = 2;
  round.job.num_machines = 2;
  EtcdOptions o;
  o.endpoints = *parseEtcdEndpoints(cluster->endpoints());  // member 0 first: the one watched
  o.timeout = 10s;
  o.attempt_timeout = 1s;
  EtcdClient client(o);
  std::vector<EtcdMember> members;
  std::vector<int64_t> leases, arrivals;
  for (const std::string name : {"alpha", "beta"}) {
    leases.push_back(client.grantLease(30s));
    members.push_back({name + "-token", name, "", 1});
    arrivals.push_back(client.put(etcdRoundKeys(round, 0).member(members.back().token),
                                  etcdRegistration(members.back()), leases.back()));
    client.put(etcdRoundKeys(round, 0).started(static_cast<int>(members.size()) - 1), "1");
  }
  EtcdLinkOptions lo;
  lo.etcd = o;
  lo.meeting = round;
  lo.machines = 2;
  lo.places = etcdRoundKeys(round, 0).placesBy("alpha-token");
  putEtcdPlaces(client, lo.places, members, arrivals);
  lo.seen_at = client.revision();
  lo.meeting.job.timeouts.keep_alive_interval = 500ms;
  EtcdLink alpha(lo);
  cluster->pause(0);
  EtcdOptions others = o;
  others.endpoints = *parseEtcdEndpoints(cluster->endpoint(1) + "," + cluster->endpoint(2));
  EtcdClient(others).revokeLease(leases[1]);  // beta's agent is gone (once 1 and 2 have a leader)
  pollfd p{alpha.fd(), POLLIN, 0};
  const int ready = ::poll(&p, 1, 15000);
  cluster->resume(0);
  ASSERT_EQ(ready, 1) << "beta's loss never reached alpha's link";
  auto e = alpha.takeEvents();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, LinkEvent::Kind::kRemoteFailure);
  EXPECT_EQ(e[0].failure.machine_rank, 1);
  EXPECT_EQ(e[0].failure.cause, kCauseLost);
}

}  // namespace
}  // namespace accel::launcher
