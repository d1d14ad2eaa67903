#include "launcher/supervise/output_prefixer.h"

#include <gtest/gtest.h>

namespace accel::launcher {
namespace {

TEST(OutputPrefixerTest, WholeLinesArePrefixed) {
  OutputPrefixer p("[rank 3] ");
  EXPECT_EQ(p.feed("a\nbc\n"), "[rank 3] a\n[rank 3] bc\n");
  EXPECT_EQ(p.flush(), "");
}

TEST(OutputPrefixerTest, PartialLinesWaitForTheirEnd) {
  OutputPrefixer p("> ");
  EXPECT_EQ(p.feed("hel"), "");
  EXPECT_EQ(p.feed("lo\nwor"), "> hello\n");
  EXPECT_EQ(p.flush(), "> wor\n");
  EXPECT_EQ(p.flush(), "");
}

TEST(OutputPrefixerTest, CarriageReturnEmitsAPieceAtOnce) {
  OutputPrefixer p("> ");
  EXPECT_EQ(p.feed("\r10%"), "> \r");
  EXPECT_EQ(p.feed("\r20%\r"), "> 10%\r> 20%\r");
  EXPECT_EQ(p.feed("done\n"), "> done\n");
}

TEST(OutputPrefixerTest, EmptyLinesArePrefixedToo) {
  OutputPrefixer p("> ");
  EXPECT_EQ(p.feed("\n\n"), "> \n> \n");
}

TEST(OutputPrefixerTest, OverlongLinesAreCut) {
  OutputPrefixer p("> ");
  std::string big(OutputPrefixer::kMaxLine + 10, 'x');
  std::string out = p.feed(big);
  EXPECT_EQ(out, "> " + std::string(OutputPrefixer::kMaxLine, 'x') + "\n");
  EXPECT_EQ(p.flush(), "> " + std::string(10, 'x') + "\n");
}

}  // namespace
}  // namespace accel::launcher
