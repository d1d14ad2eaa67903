// The end of a failed round: the master's rule (decideNextRound), and the agents, as threads
// sharing one in-memory store (the TCP store's semantics without sockets: the TCP path is the
// e2e tests'), reporting, deciding and reading the decision round by round.

#include "launcher/rendezvous/round_end.h"

#include <atomic>
#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "launcher/rendezvous/round/stop.h"
#include "launcher/rendezvous/round_close.h"
#include "libaccel/store/memory_store.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

JobFailure workerFailure(int machine, int rank, int code, std::string lastLine) {
  JobFailure f;
  f.machine_rank = machine;
  f.host = "host" + std::to_string(machine);
  f.rank = rank;
  f.local_rank = rank % 2;
  f.exit_code = code;
  f.stderr_tail = {"Traceback (most recent call last):", std::move(lastLine)};
  return f;
}

// Round `round` of a 3-machine job with 2 restarts, failed by rank 3 on machine 1; every
// machine reported and goes on.
RoundFacts facts(int round) {
  RoundFacts f;
  f.round = round;
  f.restart_count = round;  // every round before was a counted restart
  f.machines = 3;
  f.hosts = {"host0", "host1", "host2"};
  f.max_restarts = 2;
  f.failure = workerFailure(1, 3, 7, "ValueError: boom");
  for (int m : {2, 0, 1}) f.ends.push_back(RoundEnd{m, "host" + std::to_string(m), true, ""});
  return f;
}

TEST(DecideNextRoundTest, AFailedRoundRestartsEveryMachineWhileTheJobsBudgetLasts) {
  RoundDecision d = decideNextRound(facts(0));
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.why,
            "attempt 0 failed (rank 3 on machine 1 (host1) failed with exit code 7); restarting "
            "every machine (1 of 2 restarts, counted for the whole job)");
  RoundFacts second = facts(1);
  second.failure = workerFailure(2, 5, 1, "RuntimeError: other");  // a different failure
  second.previous = facts(0).failure;
  EXPECT_TRUE(decideNextRound(second).restart);
  d = decideNextRound(facts(2));  // two restarts used, by whichever machines failed
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why, "the job's 2 restarts are spent");
}

TEST(DecideNextRoundTest, AMachineThatStopsOrDoesNotReportEndsTheJob) {
  RoundFacts f = facts(0);
  f.ends[1] = RoundEnd{0, "host0", false, "its agent was told to stop (SIGTERM)"};
  RoundDecision d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why,
            "machine 0 (host0) stops: its agent was told to stop (SIGTERM); the job needs all 3 "
            "machines (--nnodes MIN:MAX lets a job go on with fewer)");
  f = facts(0);
  f.ends.erase(f.ends.begin());  // machine 2 never reported
  d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why,
            "machine 2 (host2) did not report the end of its workers; the job needs all 3 "
            "machines (--nnodes MIN:MAX lets a job go on with fewer)");
}

// --nnodes 2:3, three members: machine 2 lost.
RoundFacts elasticFacts() {
  RoundFacts f = facts(0);
  f.elastic = true;
  f.min_machines = 2;
  f.max_machines = 3;
  f.lost = {{2, "no keep-alive"}};
  f.ends.erase(f.ends.begin());  // machine 2 never reports
  return f;
}

TEST(DecideNextRoundTest, AnElasticGroupGoesOnWithoutALostMachineWhileMinRemain) {
  RoundDecision d = decideNextRound(elasticFacts());
  EXPECT_TRUE(d.restart);
  EXPECT_TRUE(d.counted);
  EXPECT_EQ(d.restart_count, 1);
  EXPECT_EQ(d.expect_machines, 2);  // the survivors: the next round closes as soon as both join
  EXPECT_EQ(d.why,
            "attempt 0 failed (rank 3 on machine 1 (host1) failed with exit code 7); going on "
            "without machine 2 (host2) lost (no keep-alive); restarting every machine (1 of 2 "
            "restarts, counted for the whole job)");
  RoundFacts f = elasticFacts();
  f.waiting = 1;  // a machine already registered for the next round: it closes with 3
  EXPECT_EQ(decideNextRound(f).expect_machines, 3);
  // A preempted machine (its agent told to stop) is dropped the same way.
  f = elasticFacts();
  f.lost.clear();
  f.ends.push_back(RoundEnd{2, "host2", false, "its agent was told to stop (SIGTERM)"});
  d = decideNextRound(f);
  EXPECT_TRUE(d.restart);
  EXPECT_NE(d.why.find("going on without machine 2 (host2) stops: its agent was told to stop "
                       "(SIGTERM)"),
            std::string::npos)
      << d.why;
  // Below MIN the job ends, naming who is gone.
  f = elasticFacts();
  f.min_machines = 3;
  d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why,
            "machine 2 (host2) lost (no keep-alive); 2 of the 3 machines the job needs remain");
  // ... unless machines already wait to join (a spare, a member dropped by mistake that came
  // back as a newcomer): the next round forms with them.
  f.waiting = 1;
  d = decideNextRound(f);
  EXPECT_TRUE(d.restart) << d.why;
  EXPECT_EQ(d.expect_machines, 3);
  f.min_machines = 4;
  f.max_machines = 4;
  d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why,
            "machine 2 (host2) lost (no keep-alive); 2 of the 4 machines the job needs remain and "
            "1 waits to join");
  // A static job cannot go on without it.
  f = elasticFacts();
  f.elastic = false;
  EXPECT_FALSE(decideNextRound(f).restart);
}

TEST(DecideNextRoundTest, AMachineThatJoinsReformsTheGroupWithoutCountingARestart) {
  RoundFacts f = facts(1);
  f.machines = 2;
  f.max_machines = 3;
  f.elastic = true;
  f.min_machines = 1;
  f.hosts.pop_back();
  f.ends.erase(f.ends.begin());  // members 0 and 1 reported
  f.waiting = 1;
  f.failure.reset();  // a machine that joins is no failure
  f.joined = "a machine is waiting to join";
  RoundDecision d = decideNextRound(f);
  EXPECT_TRUE(d.restart);
  EXPECT_FALSE(d.counted);
  EXPECT_EQ(d.restart_count, 1);  // unchanged
  EXPECT_EQ(d.expect_machines, 3);
  EXPECT_EQ(d.why, "a machine is waiting to join (not counted as a restart)");
  f.restart_count = f.max_restarts;  // even with the budget spent
  EXPECT_TRUE(decideNextRound(f).restart);
}

TEST(DecideNextRoundTest, OnlyAWorkersFailureIsRestarted) {
  RoundFacts f = facts(0);
  f.failure = JobFailure{};
  f.failure->machine_rank = 2;
  f.failure->host = "host2";
  f.failure->reason = "its agent received SIGTERM";
  EXPECT_EQ(decideNextRound(f).why, "machine 2 (host2): its agent received SIGTERM");
  f.failure.reset();
  EXPECT_FALSE(decideNextRound(f).restart);
}

TEST(DecideNextRoundTest, TheSameFailureTwiceWithoutProgressIsNotRetried) {
  RoundFacts f = facts(1);
  f.heartbeats = true;  // the ranks send heartbeats: the agent sees their steps
  f.previous = f.failure;
  RoundDecision d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why,
            "attempts 0 and 1 failed the same way before any rank completed a step (rank 3 on "
            "machine 1 (host1) failed with exit code 7; last stderr line: ValueError: boom); a "
            "restart would fail again (--retry_identical_failures retries)");
  f.progress = true;  // a rank completed a step in the second round
  EXPECT_TRUE(decideNextRound(f).restart);
  f.progress = false;
  f.retry_identical_failures = true;
  EXPECT_TRUE(decideNextRound(f).restart);
  f.retry_identical_failures = false;
  f.failure->stderr_tail.back() = "ValueError: another";  // not the same line
  EXPECT_TRUE(decideNextRound(f).restart);
}

// host1's local rank 0 exits at import in every round, but the order in which the machines
// joined gave it global rank 4, then 2: still the same failure. A hang never is one.
TEST(DecideNextRoundTest, TheSameFailureUnderAnotherGlobalRankIsNotRetried) {
  RoundFacts f = facts(1);
  f.previous = workerFailure(2, 4, 7, "ValueError: boom");
  f.failure = workerFailure(1, 2, 7, "ValueError: boom");
  RoundDecision d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  // Without heartbeats the rule rests on stdout, and says so.
  EXPECT_EQ(d.why,
            "attempts 0 and 1 failed the same way before any rank wrote to stdout (no "
            "heartbeats: the agent sees no steps) (rank 2 on machine 1 (host1) failed with exit "
            "code 7, as rank 4 did; last stderr line: ValueError: boom); a restart would fail "
            "again (--retry_identical_failures retries)");
  f.failure->hung = true;
  EXPECT_TRUE(decideNextRound(f).restart);
  f.failure->hung = false;
  f.failure->exit_code = 8;  // another code
  EXPECT_TRUE(decideNextRound(f).restart);
}

// One machine: the same rule, its notices without machines; a job that asked for no restart
// ends without a word from the rule (the summary says it all).
TEST(DecideNextRoundTest, OneMachineFollowsTheSameRule) {
  RoundFacts f;
  f.one_machine = true;
  f.machines = f.max_machines = f.min_machines = 1;
  f.ends.push_back(RoundEnd{0, "here", true, ""});
  f.max_restarts = 2;
  f.failure = workerFailure(0, 1, 3, "ValueError: boom");
  RoundDecision d = decideNextRound(f);
  EXPECT_TRUE(d.restart);
  EXPECT_TRUE(d.counted);
  EXPECT_EQ(d.restart_count, 1);
  EXPECT_EQ(d.why, "attempt 0 failed (rank 1: exit code 3); restarting (1 of 2)");
  f.max_restarts = 0;
  d = decideNextRound(f);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why, "");
}

class RoundEndTest : public ::testing::Test {
 protected:
  // Every agent's view of the job's store (one store, shared by the agents' threads).
  store::MemoryStore* client() { return &store_; }
  static GroupSettings settings() {
    GroupSettings o;
    o.store_address = "test";
    return o;
  }
  store::MemoryStore store_;
};

TEST_F(RoundEndTest, TheMasterDecidesOnceEveryMachineEndedAndTheOthersReadIt) {
  auto other = [this](int machine, int r) {
    auto c = client();
    reportRoundEnd(*c, settings(), r, RoundEnd{machine, "h" + std::to_string(machine), true, ""});
    return readDecision(*c, settings(), r, 10s);
  };
  auto m1 = std::async(std::launch::async, other, 1, 0);
  auto m2 = std::async(std::launch::async, other, 2, 0);
  auto c = client();
  reportRoundEnd(*c, settings(), 0, RoundEnd{0, "h0", true, ""});
  std::vector<RoundEnd> ends = awaitRoundEnds(*c, settings(), 0, 3, 10s);
  ASSERT_EQ(ends.size(), 3u);
  std::vector<int> machines;
  for (const auto& e : ends) machines.push_back(e.machine_rank);
  std::sort(machines.begin(), machines.end());
  EXPECT_EQ(machines, (std::vector<int>{0, 1, 2}));
  publishDecision(*c, settings(), 0, RoundDecision{true, "restarting"});
  for (auto* f : {&m1, &m2}) {
    auto d = f->get();
    ASSERT_TRUE(d.ok()) << d.error();
    EXPECT_TRUE(d->restart);
    EXPECT_EQ(d->why, "restarting");
  }
  // Round 1 starts from nothing: its ends and decision are its own.
  EXPECT_TRUE(awaitRoundEnds(*c, settings(), 1, 3, 50ms).empty());
  auto late = readDecision(*c, settings(), 1, 50ms);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error(), "the master agent did not say within 0.05 s whether the job restarts");
}

TEST_F(RoundEndTest, TheMasterStopsWaitingForAMachineThatNeverReports) {
  auto c = client();
  reportRoundEnd(*c, settings(), 0, RoundEnd{0, "h0", true, ""});
  reportRoundEnd(*c, settings(), 0,
                 RoundEnd{2, "h2", false, "its agent was told to stop (SIGINT)"});
  std::vector<RoundEnd> ends = awaitRoundEnds(*c, settings(), 0, 3, 300ms);  // machine 1 is silent
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[1].machine_rank, 2);
  EXPECT_FALSE(ends[1].continues);
  EXPECT_EQ(ends[1].why_not, "its agent was told to stop (SIGINT)");
}

// Machine 2 reported and was then found lost: it counts once, so the master still waits for
// machine 1's report (counting it twice ended the wait and dropped machine 1 as silent).
TEST_F(RoundEndTest, AMemberThatReportedAndWasLostCountsOnce) {
  auto c = client();
  reportRoundEnd(*c, settings(), 0, RoundEnd{0, "h0", true, ""});
  reportRoundEnd(*c, settings(), 0, RoundEnd{2, "h2", true, ""});
  std::promise<void> lookedTwice;
  int looks = 0;
  auto ends = std::async(std::launch::async, [&] {
    return awaitRoundEnds(*client(), settings(), 0, 3, 10s, [&] {
      if (++looks == 2) lookedTwice.set_value();  // it went round its loop: it is waiting
      return std::vector<int>{2};
    });
  });
  lookedTwice.get_future().get();
  reportRoundEnd(*c, settings(), 0, RoundEnd{1, "h1", true, ""});
  const auto got = ends.get();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].machine_rank, 1);
}

// One agent's view of a shared MemoryStore, counting the reads of other machines' round-end
// reports (a leaderless agent that does not decide reads none).
class ReportReadsCounted : public store::Store {
 public:
  explicit ReportReadsCounted(store::MemoryStore& s) : s_(s) {}
  void set(const std::string& k, const std::string& v) override { s_.set(k, v); }
  std::string get(const std::string& k, std::chrono::milliseconds t) override {
    count({k});
    return s_.get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override { return s_.add(k, d); }
  std::string compareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return s_.compareSet(k, e, d);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) override {
    count(keys);
    s_.wait(keys, t);
  }
  bool check(const std::vector<std::string>& keys) override {
    count(keys);
    return s_.check(keys);
  }
  bool deleteKey(const std::string& k) override { return s_.deleteKey(k); }
  int64_t numKeys() override { return s_.numKeys(); }
  std::vector<std::optional<std::string>> present(const std::vector<std::string>& keys) override {
    count(keys);
    return s_.present(keys);
  }
  int reportReads() const { return reads_; }

 private:
  void count(const std::vector<std::string>& keys) {
    for (const auto& k : keys) reads_ += k.find("/end-of/") != std::string::npos;
  }
  store::MemoryStore& s_;
  std::atomic<int> reads_{0};
};

// Leaderless rounds (etcd): 4 machines, machine 0 lost. Only the lowest member not lost reads the
// others' reports and decides; the others read its decision — with what it saw of the ranks'
// progress, which each remembers for the next decision. When that one is found lost as well, the
// next decides.
class LeaderlessCloseTest : public RoundEndTest {
 protected:
  static GroupSettings leaderless(int machine) {
    GroupSettings o = settings();
    o.leaderless = true;
    o.num_machines = 4;
    o.min_machines = 2;
    o.max_restarts = 2;
    o.host = "h" + std::to_string(machine);
    o.timeouts.keep_alive_interval = 20ms;
    o.timeouts.keep_alive_misses = 1;
    o.timeouts.close = 10s;
    return o;
  }
  void SetUp() override {
    store_.set(
        roundKeys(leaderless(0), 0).stop(),
        encodeRoundStop(RoundStop::failed(lostFailure({0, "gone"}, "h0", "its lease expired"))));
  }
  RoundDecision close(int machine, bool progress,
                      const std::function<std::vector<LostMachine>()>& lost,
                      ReportReadsCounted& view) {
    RendezvousResult joined;
    joined.machine_rank = machine;
    joined.size = joined.world_size = 4;
    joined.max_restarts = 2;
    AttemptReport last;
    last.attempt = 0;
    last.printed = progress;  // a rank printed: it progressed (no heartbeats here)
    RoundCloser closer(leaderless(machine), false);
    return closer.close(view, {}, joined, last, false, {lost, [] { return 0; }});
  }
};

TEST_F(LeaderlessCloseTest, TheLowestMemberNotLostAloneReadsTheReports) {
  auto lost = [] { return std::vector<LostMachine>{{0, "gone"}}; };
  ReportReadsCounted v1(store_), v2(store_), v3(store_);
  auto m2 = std::async(std::launch::async, [&] { return close(2, false, lost, v2); });
  auto m3 = std::async(std::launch::async, [&] { return close(3, false, lost, v3); });
  const RoundDecision d1 = close(1, true, lost, v1);
  EXPECT_TRUE(d1.restart) << d1.why;
  EXPECT_TRUE(d1.progress);
  EXPECT_EQ(d1.expect_machines, 3);
  for (auto* f : {&m2, &m3}) {
    const RoundDecision d = f->get();
    EXPECT_EQ(d.why, d1.why);
    EXPECT_EQ(d.restart_count, d1.restart_count);
    EXPECT_TRUE(d.progress) << "the decider's view of the progress, for the next decision";
  }
  EXPECT_GE(v1.reportReads(), 2);  // machines 2 and 3's, at least once each
  EXPECT_EQ(v2.reportReads(), 0);
  EXPECT_EQ(v3.reportReads(), 0);
}

TEST_F(LeaderlessCloseTest, WhenTheDeciderIsLostTooTheNextDecides) {
  std::atomic<bool> oneLost{false};
  auto lost = [&] {
    std::vector<LostMachine> l{{0, "gone"}};
    if (oneLost) l.push_back({1, "gone"});
    return l;
  };
  ReportReadsCounted v2(store_), v3(store_);
  auto m3 = std::async(std::launch::async, [&] { return close(3, false, lost, v3); });
  // Machine 2 waits for machine 1's decision; machine 1 is found lost, never having decided.
  store_.wait({roundKeys(leaderless(3), 0).endOf(3)}, 10s);
  oneLost = true;
  const RoundDecision d2 = close(2, false, lost, v2);
  EXPECT_TRUE(d2.restart) << d2.why;
  EXPECT_EQ(d2.expect_machines, 2);
  EXPECT_EQ(m3.get().why, d2.why);
  EXPECT_GE(v2.reportReads(), 1);
  EXPECT_EQ(v3.reportReads(), 0);
}

}  // namespace
}  // namespace accel::launcher
