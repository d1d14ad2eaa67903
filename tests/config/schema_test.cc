#include "config/schema.h"

#include <gtest/gtest.h>

namespace accel::config {
namespace {

TEST(SchemaTest, EditDistance) {
  EXPECT_EQ(editDistance("", ""), 0u);
  EXPECT_EQ(editDistance("abc", ""), 3u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(editDistance("num_procesess", "num_processes"), 2u);
}

TEST(SchemaTest, SuggestsClosestKeyForTypos) {
  EXPECT_EQ(suggestKey("num_procesess"), "num_processes");
  EXPECT_EQ(suggestKey("mixed_precison"), "mixed_precision");
  EXPECT_EQ(suggestKey("main_process_prot"), "main_process_port");
  EXPECT_EQ(suggestKey("NUM_MACHINES"), std::nullopt);  // too far: 12 substitutions
  EXPECT_EQ(suggestKey("completely_unrelated_setting"), std::nullopt);
}

TEST(SchemaTest, LegacyKeysAreKnownButNeverSuggested) {
  ASSERT_NE(findField("fp16"), nullptr);
  EXPECT_TRUE(findField("fp16")->legacy);
  EXPECT_EQ(suggestKey("fp17"), std::nullopt);
}

TEST(SchemaTest, GpuIds) {
  EXPECT_EQ(checkGpuIds("all"), std::nullopt);
  EXPECT_EQ(checkGpuIds("0"), std::nullopt);
  EXPECT_EQ(checkGpuIds("0,1,3"), std::nullopt);
  EXPECT_EQ(checkGpuIds("0, 1"), std::nullopt);
  EXPECT_EQ(checkGpuIds("0,,1"), "'0,,1': empty id at position 2");
  EXPECT_EQ(checkGpuIds("0,x"),
            "'0,x': 'x' is not a GPU index (expected 'all' or a list like 0,1,3)");
  EXPECT_EQ(checkGpuIds("1,1"), "'1,1': GPU 1 is listed twice");
  EXPECT_EQ(checkGpuIds(""), "'': empty id at position 1");
  EXPECT_EQ(checkGpuIds("-1"),
            "'-1': '-1' is not a GPU index (expected 'all' or a list like 0,1,3)");
}

}  // namespace
}  // namespace accel::config
