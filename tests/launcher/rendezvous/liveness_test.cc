// The master's judgement of a round's members, in fake time: the instants at which a member is
// found lost (gone, or silent for the keep-alive window), and those at which it is not (moving,
// finished, a pause shorter than the window). Time is a steady_clock origin plus milliseconds.

#include "launcher/rendezvous/round/liveness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/rendezvous/c10d/rendezvous.h"
#include "launcher/rendezvous/round/closing.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;
using time_point = Liveness::time_point;

const time_point kStart{};  // the round's start
time_point at(std::chrono::milliseconds ms) { return kStart + ms; }

// --rdzv_conf keep_alive_interval=1,keep_alive_max_attempt=3: a 3 s window.
RoundTimeouts timeouts() {
  RoundTimeouts t;
  t.keep_alive_interval = 1s;
  t.keep_alive_misses = 3;
  return t;
}

const std::function<bool()> kNotFinished = [] { return false; };

// Machine 2's agent sends keep-alives every second until 4 s, then falls silent; the master
// reads every member each second. Lost at the first look 3 s after the counter last moved
// (7 s), not a look earlier; the others are never judged lost.
TEST(LivenessTest, ASilentMemberIsLostAtTheFirstLookPastTheWindow) {
  Liveness l(3, 3, 0, timeouts(), kStart);
  for (int s = 0; s <= 10; ++s) {
    const int64_t machine2 = std::min(s, 4);
    auto lost1 = l.keepAlive(1, s, at(s * 1000ms), kNotFinished);
    auto lost2 = l.keepAlive(2, machine2, at(s * 1000ms), kNotFinished);
    EXPECT_FALSE(lost1) << "machine 1 moves every second, at " << s << " s";
    if (s < 7) {
      EXPECT_FALSE(lost2) << "at " << s << " s";
    } else if (s == 7) {
      ASSERT_TRUE(lost2) << "3 s after its last keep-alive (4 s)";
      EXPECT_EQ(lost2->kind, GroupChange::Kind::kLost);
      EXPECT_EQ(lost2->lost(), (LostMachine{2, "no keep-alive for 3 s"}));
    } else {
      EXPECT_FALSE(lost2) << "found once: at " << s << " s";
    }
  }
  EXPECT_FALSE(l.watching(2));
  EXPECT_TRUE(l.watching(1));
  EXPECT_EQ(l.windowText(), "keep_alive_interval 1 s x keep_alive_max_attempt 3");
}

// A pause shorter than the window (a 2 s partition) is not a loss.
TEST(LivenessTest, APauseShorterThanTheWindowIsNotALoss) {
  Liveness l(2, 2, 0, timeouts(), kStart);
  EXPECT_FALSE(l.keepAlive(1, 1, at(0ms), kNotFinished));
  EXPECT_FALSE(l.keepAlive(1, 1, at(1000ms), kNotFinished));
  EXPECT_FALSE(l.keepAlive(1, 1, at(2900ms), kNotFinished));  // silent for 2.9 s
  EXPECT_FALSE(l.keepAlive(1, 4, at(3100ms), kNotFinished));  // the queued ones arrive
  EXPECT_FALSE(l.keepAlive(1, 4, at(6000ms), kNotFinished));  // 2.9 s since it moved
  EXPECT_TRUE(l.keepAlive(1, 4, at(6100ms), kNotFinished));   // 3 s: lost
}

// An agent whose process died is lost at the first look after its presence went, whatever its
// keep-alives said a moment ago; the master's own machine is never judged.
TEST(LivenessTest, AGoneAgentIsLostAtOnce) {
  Liveness l(3, 3, 1, timeouts(), kStart);
  EXPECT_FALSE(l.keepAlive(2, 7, at(900ms), kNotFinished));
  EXPECT_FALSE(l.presence(2, true, kNotFinished));
  auto lost = l.presence(2, false, kNotFinished);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->kind, GroupChange::Kind::kLost);
  EXPECT_EQ(lost->lost(), (LostMachine{2, "its agent is gone"}));
  EXPECT_FALSE(l.presence(2, false, kNotFinished));           // once
  EXPECT_FALSE(l.keepAlive(2, 7, at(9000ms), kNotFinished));  // not again by keep-alives
  EXPECT_FALSE(l.presence(1, false, kNotFinished));           // the master itself
  EXPECT_FALSE(l.watching(1));
}

// A member that said it finished before it went left (no failure), whichever way it went;
// asking whether it finished happens only when it would otherwise be lost.
TEST(LivenessTest, AMemberThatFinishedLeftAndIsNotLost) {
  Liveness l(3, 3, 0, timeouts(), kStart);
  int asked = 0;
  auto finished = [&asked] {
    ++asked;
    return true;
  };
  EXPECT_FALSE(l.presence(1, true, finished));
  EXPECT_FALSE(l.keepAlive(2, 1, at(100ms), finished));
  EXPECT_EQ(asked, 0);
  auto left1 = l.presence(1, false, finished);
  auto left2 = l.keepAlive(2, 1, at(3200ms), finished);
  ASSERT_TRUE(left1 && left2);
  EXPECT_EQ(left1->kind, GroupChange::Kind::kLeft);
  EXPECT_EQ(left1->machine, 1);
  EXPECT_EQ(left2->kind, GroupChange::Kind::kLeft);
  EXPECT_EQ(left2->machine, 2);
  EXPECT_EQ(asked, 2);
  EXPECT_FALSE(l.watching(1));
  EXPECT_FALSE(l.watching(2));
  EXPECT_FALSE(l.presence(1, false, kNotFinished));  // finished stays finished
}

// torch's keep_alive_interval=5,keep_alive_max_attempt=3: the window follows the settings.
TEST(LivenessTest, TheWindowIsWhatTheSettingsSay) {
  RoundTimeouts t = timeouts();
  t.keep_alive_interval = 5s;
  Liveness l(2, 2, 0, t, kStart);
  EXPECT_FALSE(l.keepAlive(1, 0, at(0ms), kNotFinished));
  EXPECT_FALSE(l.keepAlive(1, 0, at(14999ms), kNotFinished));
  auto lost = l.keepAlive(1, 0, at(15000ms), kNotFinished);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->how, "no keep-alive for 15 s");
}

// A machine registered for the next round while the group has room is the group growing, once;
// with the group full it is a spare, no change.
TEST(LivenessTest, AnArrivalGrowsAGroupWithRoomOnce) {
  Liveness room(2, 3, 0, timeouts(), kStart);
  EXPECT_FALSE(room.arrivals(0));
  auto joined = room.arrivals(1);
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->kind, GroupChange::Kind::kJoined);
  EXPECT_EQ(joined->how,
            "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to "
            "take it");
  EXPECT_FALSE(room.arrivals(2));  // once
  EXPECT_TRUE(room.watching(1));   // nobody lost
  Liveness full(3, 3, 0, timeouts(), kStart);
  EXPECT_FALSE(full.arrivals(1));
}

// --nnodes 2:4 with a last call of 30 s: closed at once with 4; with 2 or 3, 30 s after the
// first look that saw 2 — not before, and not later; a re-forming group that expects 3 closes
// as soon as 3 are there.
TEST(RoundClosingTest, TheLastCallClosesTheFirstRound) {
  RoundClosing c(2, 4, 0, 30s);
  EXPECT_FALSE(c.ready(1, at(0ms)));
  EXPECT_FALSE(c.lastCallEnd());  // MIN not met: no last call yet
  EXPECT_FALSE(c.ready(2, at(1000ms)));
  ASSERT_TRUE(c.lastCallEnd());
  EXPECT_EQ(*c.lastCallEnd(), at(31000ms));
  EXPECT_FALSE(c.ready(3, at(20000ms)));
  EXPECT_FALSE(c.ready(3, at(30999ms)));
  EXPECT_TRUE(c.ready(3, at(31000ms)));
  RoundClosing full(2, 4, 0, 30s);
  EXPECT_TRUE(full.ready(4, at(0ms)));   // MAX: at once
  RoundClosing survivors(2, 4, 3, 30s);  // a re-forming group that expects 3
  EXPECT_FALSE(survivors.ready(2, at(0ms)));
  EXPECT_TRUE(survivors.ready(3, at(10ms)));  // no last call for the expected
  RoundClosing all(0, 3, 0, 30s);             // a static job: all of them
  EXPECT_FALSE(all.ready(2, at(3600000ms)));
  EXPECT_TRUE(all.ready(3, at(3600001ms)));
}

// A group that falls below MIN during the last call (a machine that joined died) starts a new
// last call when MIN is back, as torch's dynamic rendezvous does: it does not close at once on
// the old one.
TEST(RoundClosingTest, FallingBelowMinStartsTheLastCallAgain) {
  RoundClosing c(2, 4, 0, 30s);
  EXPECT_FALSE(c.ready(2, at(1000ms)));
  EXPECT_EQ(*c.lastCallEnd(), at(31000ms));
  EXPECT_FALSE(c.ready(1, at(5000ms)));
  EXPECT_FALSE(c.lastCallEnd());
  EXPECT_FALSE(c.ready(2, at(40000ms)));  // past the old last call: not closed
  EXPECT_EQ(*c.lastCallEnd(), at(70000ms));
  EXPECT_TRUE(c.ready(2, at(70000ms)));
}

// The master's rule from its settings: MIN:MAX, the survivors expected, the last call.
TEST(RoundClosingTest, TheMastersRuleComesFromItsSettings) {
  GroupSettings o;
  o.num_machines = 4;
  o.min_machines = 2;
  o.timeouts.last_call = 30s;
  RoundStart reforming;
  reforming.expect_machines = 3;
  RoundClosing c = roundClosing(o, reforming);
  EXPECT_FALSE(c.ready(2, at(0ms)));
  EXPECT_EQ(*c.lastCallEnd(), at(30000ms));
  EXPECT_TRUE(c.ready(3, at(1ms)));
}

// What a waiting round says: before MIN, how many are needed and the join timeout's rest; in the
// last call, when it closes (the nearest second, never "0 s" before it does).
TEST(RoundClosingTest, FormingTextSaysWhatTheRoundWaitsFor) {
  EXPECT_EQ(formingText(1, 2, 3, std::nullopt, 589'400ms),
            "1 of 2–3 machines (2 needed); 589 s left to join (--rdzv_timeout)");
  EXPECT_EQ(formingText(1, 1, 2, 26'600ms, 0ms),
            "1 of 1–2 machines; the round closes in 27 s unless more come (the last call)");
  EXPECT_EQ(formingText(2, 3, 3, std::nullopt, 10s),
            "2 of 3 machines (3 needed); 10 s left to join (--rdzv_timeout)");
  EXPECT_EQ(formingText(1, 1, 2, 1ms, 0ms),
            "1 of 1–2 machines; the round closes in 1 s unless more come (the last call)");
}

// The round before's ranks, read from a member list as both backends keep it (position = machine
// rank, "token" = the agent's); what is not such a list, or a member without a string token,
// gives no rank, and a newcomer then ranks by arrival.
TEST(RoundClosingTest, RanksByTokenReadsEitherBackendsMemberList) {
  const auto list = nlohmann::json::parse(
      R"([{"token":"b","host":"h1"},{"token":7},{"token":"a","machine_rank":9},"junk"])");
  EXPECT_EQ(ranksByToken(list), (std::map<std::string, int>{{"b", 0}, {"a", 2}}));
  EXPECT_TRUE(ranksByToken(nlohmann::json::parse("{\"members\":[]}")).empty());
  EXPECT_TRUE(ranksByToken(nlohmann::json::parse("not json", nullptr, false)).empty());
  // Fed back to the rule, the survivors keep their places ahead of a newcomer who came first.
  const std::vector<Registrant> now{{"new", 0, false}, {"a", 1, false}, {"b", 2, false}};
  EXPECT_EQ(rankMembers(now, ranksByToken(list), 3), (std::vector<size_t>{2, 1, 0}));
}

// etcd's presence signal (a registration gone with its lease) in the backend's own words: lost,
// or left when it finished; once. A member another link found lost first is not judged again,
// and this agent's own machine never is.
TEST(LivenessTest, AMemberGoneInItsBackendsWordsIsLostOnceOrLeftWhenFinished) {
  Liveness l(4, 4, 0, timeouts(), kStart);
  auto lost = l.gone(1, "its lease ended", kNotFinished);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->kind, GroupChange::Kind::kLost);
  EXPECT_EQ(lost->lost(), (LostMachine{1, "its lease ended"}));
  EXPECT_FALSE(l.gone(1, "its lease ended", kNotFinished));  // once
  auto left = l.gone(2, "its lease ended", [] { return true; });
  ASSERT_TRUE(left);
  EXPECT_EQ(left->kind, GroupChange::Kind::kLeft);
  EXPECT_TRUE(l.lostElsewhere(3));
  EXPECT_FALSE(l.lostElsewhere(3));
  EXPECT_FALSE(l.gone(3, "its lease ended", kNotFinished));  // already lost, elsewhere
  EXPECT_FALSE(l.lostElsewhere(0));                          // its own machine is never judged
  EXPECT_FALSE(l.gone(0, "its lease ended", kNotFinished));
  for (int m = 0; m < 4; ++m) EXPECT_FALSE(l.watching(m)) << m;
}

}  // namespace
}  // namespace accel::launcher
