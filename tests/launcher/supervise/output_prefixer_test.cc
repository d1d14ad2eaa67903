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
  EXPECT_EQ(p.feed("\r10%"), "");  // tqdm's leading '\r': no lone prefix
  EXPECT_EQ(p.feed("\r20%\r"), "> 10%\r> 20%\r");
  EXPECT_EQ(p.feed("done\n"), "> done\n");
}

// Two ranks' tqdm bars ("\r" + bar, then "\n" at the end), fed alternately as a console does:
// every emitted piece is one rank's whole bar with its own prefix.
TEST(OutputPrefixerTest, TwoRanksBarsStayWholePerRank) {
  OutputPrefixer r0("[rank 0] "), r1("[rank 1] ");
  std::string console;
  for (const char* step : {"\rprogress 0%", "\rprogress 50%", "\rprogress 100%"}) {
    console += r0.feed(step);
    console += r1.feed(step);
  }
  console += r0.feed("\n");
  console += r1.feed("\r\n");
  EXPECT_EQ(console,
            "[rank 0] progress 0%\r[rank 1] progress 0%\r[rank 0] progress 50%\r"
            "[rank 1] progress 50%\r[rank 0] progress 100%\n[rank 1] progress 100%\r\n");
}

// mpirun's stream with rank tags: each line labelled by its MPI rank, mpirun's own as such.
TEST(OutputPrefixerTest, MpiTagsBecomeRankLabels) {
  OutputPrefixer p("[rank 0] ", true);
  EXPECT_EQ(p.feed("[1,3]<stdout>:hello\n[1,0]<stderr>: oops\n"),
            "[rank 3] hello\n[rank 0]  oops\n");
  EXPECT_EQ(p.feed("[2] from MPICH\nmpirun: a note\n[x] not a tag\n"),
            "[rank 2] from MPICH\n[mpirun] mpirun: a note\n[mpirun] [x] not a tag\n");
  OutputPrefixer plain("[rank 0] ");
  EXPECT_EQ(plain.feed("[1,3]<stdout>:hello\n"), "[rank 0] [1,3]<stdout>:hello\n");
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
