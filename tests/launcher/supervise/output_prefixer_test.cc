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
  EXPECT_EQ(p.feed("\r"), "");  // tqdm's leading '\r': no lone prefix
  EXPECT_EQ(p.feed("10%\r20%\r"), "> 10%\r> 20%\r");
  EXPECT_EQ(p.feed("done\n"), "> done\n");
}

// tqdm's way: "\rstep i", whose end is the next redraw seconds later. Each piece is shown as it
// is read, not one update late; a piece read in two parts is shown again whole; the '\n' that
// ends the bar repeats its last state as a line.
TEST(OutputPrefixerTest, OpenProgressPieceIsShownWhenRead) {
  OutputPrefixer p("> ");
  EXPECT_EQ(p.feed("\rstep 1"), "> step 1\r");
  EXPECT_EQ(p.feed("\rstep 2"), "> step 2\r");
  EXPECT_EQ(p.feed("\rste"), "> ste\r");
  EXPECT_EQ(p.feed("p 3"), "> step 3\r");
  EXPECT_EQ(p.feed("\n"), "> step 3\n");
  EXPECT_EQ(p.flush(), "");
  EXPECT_EQ(p.feed("plain"), "");  // an ordinary partial line still waits for its end
  EXPECT_EQ(p.feed(" line\n"), "> plain line\n");
  EXPECT_EQ(p.feed("\rlast\r\n"), "> last\r\n");  // "\r\n" after a redraw: no repeat
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
            "[rank 1] progress 50%\r[rank 0] progress 100%\r[rank 1] progress 100%\r"
            "[rank 0] progress 100%\n\n");
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
