#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "accel/data.h"

namespace accel {
namespace {

std::vector<std::vector<std::vector<size_t>>> allRanks(ShardOptions o, int world,
                                                       uint64_t epoch = 0) {
  std::vector<std::vector<std::vector<size_t>>> out;
  for (int r = 0; r < world; ++r) {
    ShardedBatchSampler s(o, r, world);
    s.setEpoch(epoch);
    out.push_back(s.batches());
  }
  return out;
}

TEST(ShardedBatchSamplerTest, BatchIGoesToRankIModN) {
  ShardOptions o;
  o.dataset_size = 16;
  o.batch_size = 2;
  auto ranks = allRanks(o, 2);
  EXPECT_EQ(ranks[0], (std::vector<std::vector<size_t>>{{0, 1}, {4, 5}, {8, 9}, {12, 13}}));
  EXPECT_EQ(ranks[1], (std::vector<std::vector<size_t>>{{2, 3}, {6, 7}, {10, 11}, {14, 15}}));
}

TEST(ShardedBatchSamplerTest, DisjointAndCoveringWhenDivisible) {
  for (int world : {1, 2, 3, 4}) {
    ShardOptions o;
    o.dataset_size = 24 * 5;
    o.batch_size = 5;
    o.shuffle = true;
    o.seed = 7;
    std::multiset<size_t> seen;
    for (auto& batches : allRanks(o, world, 3)) {
      for (auto& b : batches) seen.insert(b.begin(), b.end());
    }
    EXPECT_EQ(seen.size(), o.dataset_size) << world;
    EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), o.dataset_size)
        << "duplicates, world " << world;
  }
}

TEST(ShardedBatchSamplerTest, EvenBatchesWrapAround) {
  ShardOptions o;
  o.dataset_size = 10;
  o.batch_size = 3;
  auto ranks = allRanks(o, 2);  // 12 slots for 10 samples: 0 and 1 again at the end
  EXPECT_EQ(ranks[0], (std::vector<std::vector<size_t>>{{0, 1, 2}, {6, 7, 8}}));
  EXPECT_EQ(ranks[1], (std::vector<std::vector<size_t>>{{3, 4, 5}, {9, 0, 1}}));
  ShardedBatchSampler s(o, 0, 2);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.remainder(), 4u);  // the last global step has 4 real samples: 6 7 8 9
}

TEST(ShardedBatchSamplerTest, UnevenAndDropLast) {
  ShardOptions o;
  o.dataset_size = 10;
  o.batch_size = 3;
  o.even_batches = false;
  auto ranks = allRanks(o, 2);
  EXPECT_EQ(ranks[0].size(), 2u);
  EXPECT_EQ(ranks[1].size(), 2u);
  EXPECT_EQ(ranks[1].back(), (std::vector<size_t>{9}));
  o.even_batches = true;
  o.drop_last = true;
  ranks = allRanks(o, 2);
  EXPECT_EQ(ranks[0], (std::vector<std::vector<size_t>>{{0, 1, 2}}));
  EXPECT_EQ(ranks[1], (std::vector<std::vector<size_t>>{{3, 4, 5}}));
}

TEST(ShardedBatchSamplerTest, SetEpochReshufflesTheSameOnEveryRank) {
  ShardOptions o;
  o.dataset_size = 32;
  o.batch_size = 4;
  o.shuffle = true;
  auto e0 = allRanks(o, 2, 0), e0again = allRanks(o, 2, 0), e1 = allRanks(o, 2, 1);
  EXPECT_EQ(e0, e0again);
  EXPECT_NE(e0, e1);
  std::set<size_t> union0;
  for (auto& r : e1) {
    for (auto& b : r) union0.insert(b.begin(), b.end());
  }
  EXPECT_EQ(union0.size(), 32u);
}

TEST(SplitBetweenProcessesTest, ExtrasGoToTheLowestRanks) {
  EXPECT_EQ(splitBetweenProcesses(10, 0, 3), (std::pair<size_t, size_t>{0, 4}));
  EXPECT_EQ(splitBetweenProcesses(10, 1, 3), (std::pair<size_t, size_t>{4, 7}));
  EXPECT_EQ(splitBetweenProcesses(10, 2, 3), (std::pair<size_t, size_t>{7, 10}));
  EXPECT_EQ(splitBetweenProcesses(2, 2, 3), (std::pair<size_t, size_t>{2, 2}));
}

}  // namespace
}  // namespace accel
