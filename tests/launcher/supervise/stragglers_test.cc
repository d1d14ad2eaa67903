// Straggler scores (launcher/supervise/stragglers.h) from the work the ranks report with their
// heartbeats, as the store tells the board.
#include "launcher/supervise/stragglers.h"

#include <gtest/gtest.h>

#include "launcher/plan/worker_env.h"

namespace accel::launcher {
namespace {

// Rank `rank` reports `workUs` of work per step for steps [from, to): the heartbeat's order, work
// first, then the step count.
void report(ProgressBoard& board, int rank, int64_t from, int64_t to, int64_t workUs,
            int64_t& total) {
  for (int64_t step = from; step < to; ++step) {
    total += workUs;
    board.onWrite(storedWorkPrefix() + std::to_string(rank), std::to_string(total));
    board.onWrite(storedHeartbeatPrefix() + std::to_string(rank), std::to_string(step + 1));
  }
}

TEST(ProgressBoard, MeasuresEachRanksWorkOverItsLastWindowOfSteps) {
  ProgressBoard board;
  board.keepWorkFor(10);
  int64_t a = 0, b = 0;
  report(board, 0, 0, 9, 1000, a);  // 9 steps: not a window yet
  EXPECT_TRUE(board.workWindows().empty());
  report(board, 0, 9, 30, 1000, a);
  report(board, 1, 0, 5, 1000, b);  // rank 1 slows down after 5 steps: 3 ms a step
  report(board, 1, 5, 30, 3000, b);
  const auto w = board.workWindows();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w.at(0).to_step, 30);
  EXPECT_EQ(w.at(0).from_step, 20);  // the newest span of 10 steps: older samples were dropped
  EXPECT_EQ(w.at(0).work_us, 10 * 1000);
  EXPECT_EQ(w.at(1).work_us, 10 * 3000);
  // A rank that sends steps without work is not measured; nor are malformed values.
  board.onWrite(storedHeartbeatPrefix() + "2", "40");
  board.onWrite(storedWorkPrefix() + "3", "lots");
  board.onWrite(storedWorkPrefix() + "x", "5");
  EXPECT_EQ(board.workWindows().size(), 2u);
  board.clear();
  EXPECT_TRUE(board.workWindows().empty());
}

TEST(Stragglers, AScoreIsTheMedianWorkOverTheRanksOwnAtMostOne) {
  // Ranks 0-3 on two machines (2 a machine); rank 3 works three times as long, rank 1 a bit less.
  const std::map<int, WorkWindow> windows = {{0, {10, 30, 20 * 1000}},
                                             {1, {10, 30, 20 * 900}},
                                             {2, {10, 30, 20 * 1000}},
                                             {3, {12, 32, 20 * 3000}}};
  const auto scores = scoreRanks(windows, 2);
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_DOUBLE_EQ(scores[0].work_s, 0.001);
  EXPECT_DOUBLE_EQ(scores[0].score, 1.0);  // the (lower) median: 1 ms
  EXPECT_DOUBLE_EQ(scores[1].score, 1.0);  // faster than the median: at most 1
  EXPECT_NEAR(scores[3].score, 1.0 / 3, 1e-12);
  EXPECT_EQ(scores[3].machine, 1);
  EXPECT_EQ(scores[3].from_step, 12);
  EXPECT_EQ(scores[3].to_step, 32);
  // Of two ranks the faster is the median, so the slow one is named.
  const auto two = scoreRanks({{0, {0, 20, 20 * 1000}}, {1, {0, 20, 20 * 4000}}}, 1);
  EXPECT_DOUBLE_EQ(two[1].score, 0.25);
  EXPECT_EQ(two[1].machine, 1);
  // One rank alone has no median to be measured against.
  EXPECT_TRUE(scoreRanks({{0, {0, 20, 20 * 1000}}}, 1).empty());
}

TEST(Stragglers, ARankIsNamedOnceWhenItFallsBelowTheThresholdAndOnceWhenItIsBack) {
  StragglerWatch watch(0.7);
  auto at = [](int rank, double score) {
    StragglerScore s;
    s.rank = rank;
    s.machine = rank;
    s.score = score;
    s.work_s = 0.03 / score;
    s.from_step = 40;
    s.to_step = 61;
    return s;
  };
  EXPECT_TRUE(watch.update({at(0, 1.0), at(1, 0.9)}).empty());
  auto changes = watch.update({at(0, 1.0), at(1, 0.33)});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_TRUE(changes[0].straggles);
  EXPECT_EQ(stragglerNotice(changes[0], watch.threshold()),
            "rank 1 (machine 1) straggles: its own work takes 91 ms a step, the job's median 30 "
            "ms (score 0.33 over steps 40–61, below --straggler_threshold 0.70)");
  EXPECT_TRUE(watch.update({at(0, 1.0), at(1, 0.31)}).empty());  // still below: said once
  EXPECT_EQ(watch.straggling(), std::set<int>{1});
  EXPECT_TRUE(watch.update({}).empty());  // nothing scored this tick: the last scores stay
  EXPECT_EQ(watch.latest().size(), 2u);
  changes = watch.update({at(0, 1.0), at(1, 0.95)});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].straggles);
  EXPECT_EQ(stragglerNotice(changes[0], watch.threshold()),
            "rank 1 (machine 1) keeps pace again: score 0.95 over steps 40–61");
  EXPECT_TRUE(watch.straggling().empty());
  watch.update({at(0, 0.5), at(1, 0.2)});
  EXPECT_EQ(watch.named(), (std::vector<int>{1, 0}));  // in the order named, each once
}

}  // namespace
}  // namespace accel::launcher
