#include "launcher/plan/stream_masks.h"

#include <gtest/gtest.h>

namespace accel::launcher {
namespace {

std::vector<int> masks(std::string_view text, int localWorldSize) {
  auto m = parseStreamMasks("--tee", text, localWorldSize);
  EXPECT_TRUE(m.ok()) << text << ": " << m.error();
  return m.ok() ? *m : std::vector<int>{};
}

std::string error(std::string_view text, int localWorldSize) {
  auto m = parseStreamMasks("--redirects", text, localWorldSize);
  EXPECT_FALSE(m.ok()) << text;
  return m.ok() ? "" : m.error();
}

TEST(StreamMasksTest, OneValueForEveryLocalRank) {
  EXPECT_EQ(masks("0", 3), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(masks("1", 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(masks("2", 1), (std::vector<int>{2}));
  EXPECT_EQ(masks("3", 4), (std::vector<int>{3, 3, 3, 3}));
}

TEST(StreamMasksTest, MapByLocalRankLeavesTheOthersAtZero) {
  EXPECT_EQ(masks("0:3,1:1", 2), (std::vector<int>{3, 1}));
  EXPECT_EQ(masks("2:2", 4), (std::vector<int>{0, 0, 2, 0}));
  EXPECT_EQ(masks("3:1,0:2", 4), (std::vector<int>{2, 0, 0, 1}));  // any order
  EXPECT_EQ(masks("11:3", 12).at(11), 3);                          // more than torch's one digit
}

TEST(StreamMasksTest, BadValuesNameTheFlagAndTheItem) {
  EXPECT_EQ(error("4", 2),
            "--redirects: '4' is not a stream mask (0 none, 1 stdout, 2 stderr, 3 both; or "
            "LOCAL_RANK:MASK,... as "
            "in 0:3,1:1)");
  EXPECT_EQ(error("0:3,1:7", 2), "--redirects: '0:3,1:7': mask 7 is not 0, 1, 2 or 3");
  EXPECT_EQ(error("0:3,2:1", 2), "--redirects: '0:3,2:1': local rank 2 does not exist (0..1)");
  EXPECT_EQ(error("1:3,1:1", 2), "--redirects: '1:3,1:1': local rank 1 is given twice");
  for (const char* bad :
       {"", "0:", ":3", "0:3,", "a", "-1", "0;3", " 3", "0:3 ", "0=3", "0:3:1", "1,2"}) {
    EXPECT_NE(error(bad, 2).find("--redirects: '" + std::string(bad) + "'"), std::string::npos)
        << bad;
  }
  EXPECT_EQ(
      error("0:3,", 2),
      "--redirects: '0:3,': '' is not LOCAL_RANK:MASK (0 none, 1 stdout, 2 stderr, 3 both; or "
      "LOCAL_RANK:MASK,... as in 0:3,1:1)");
}

}  // namespace
}  // namespace accel::launcher
