#include "launcher/base/numbers.h"

#include <gtest/gtest.h>

namespace accel::launcher {
namespace {

TEST(ParseDigitsTest, DigitsOnlyUpToTheLimit) {
  EXPECT_EQ(parseDigits("0", 10), 0);
  EXPECT_EQ(parseDigits("007", 10), 7);
  EXPECT_EQ(parseDigits("65535", 65535), 65535);
  EXPECT_EQ(parseDigits("65536", 65535), std::nullopt);
  EXPECT_EQ(parseDigits("2", 1), std::nullopt);
  EXPECT_EQ(parseDigits("1", 0), std::nullopt);
  EXPECT_EQ(parseDigits("0", 0), 0);
  EXPECT_EQ(parseDigits("999999999999999999", 999999999999999999), 999999999999999999);
  EXPECT_EQ(parseDigits("9999999999999999999999", 999999999999999999), std::nullopt);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.0", "0x1", "1e3", "١"}) {
    EXPECT_EQ(parseDigits(bad, 1000000), std::nullopt) << "'" << bad << "'";
  }
}

TEST(ParseIntegerTest, ASignThenDigits) {
  EXPECT_EQ(parseInteger("0"), 0);
  EXPECT_EQ(parseInteger("-3"), -3);
  EXPECT_EQ(parseInteger("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parseInteger("-9223372036854775807"), -INT64_MAX);
  for (const char* bad : {"", "-", "+1", "--1", " 1", "1-", "abc", "9223372036854775808"}) {
    EXPECT_EQ(parseInteger(bad), std::nullopt) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace accel::launcher
