// The hang rule and its helpers (launcher/rank_watch.h).
#include "launcher/supervise/rank_watch.h"

#include <time.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "launcher/report/stack_frames.h"

namespace accel::launcher {
namespace {

using namespace std::chrono_literals;

const SteadyClock::time_point kNow = SteadyClock::now();

RankProgress rank(int r, std::optional<int64_t> step, std::chrono::milliseconds idle) {
  return RankProgress{r, step, kNow - idle};
}

TEST(JudgeHang, NotWhileEveryRankMoves) {
  EXPECT_FALSE(judgeHang({rank(0, 5, 100ms), rank(1, 5, 200ms)}, kNow, 3s));
}

TEST(JudgeHang, NotWhileAnotherRankAtTheSameStepStillMoves) {
  // Rank 1 is idle for the timeout, but rank 0, at its step, moved a moment ago: no hang yet.
  EXPECT_FALSE(judgeHang({rank(0, 5, 100ms), rank(1, 5, 3500ms)}, kNow, 3s));
}

TEST(JudgeHang, TheRankBehindIsStuckWhenTheOthersMovedPastIt) {
  // Rank 3 at 1042 for 120 s; the others at 1043, waiting (or not even idle: they moved past).
  std::vector<RankProgress> ranks = {rank(0, 1043, 119s), rank(1, 1043, 119s), rank(2, 1043, 1s),
                                     rank(3, 1042, 120s), rank(4, 1043, 119s), rank(5, 1043, 119s),
                                     rank(6, 1043, 119s), rank(7, 1043, 119s)};
  auto v = judgeHang(ranks, kNow, 60s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->stuck, std::vector<int>{3});
  EXPECT_TRUE(v->steps_differ);
  EXPECT_EQ(v->message, "rank 3 at step 1042 for 120 s; ranks 0\u20132, 4\u20137 at step 1043");
}

TEST(JudgeHang, EqualStepsNameEveryIdleRankForTheStacksToChoose) {
  auto v = judgeHang({rank(0, 7, 3s), rank(1, 7, 4s), rank(2, 7, 2s)}, kNow, 3s);
  ASSERT_TRUE(v);
  EXPECT_FALSE(v->steps_differ);
  EXPECT_EQ(v->stuck, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(v->message, "ranks 0\u20132 made no progress for 4 s (all at step 7)");
}

TEST(JudgeHang, WithoutHeartbeatsOnlyIdleness) {
  // Rank 2 still moves (not even half the timeout idle): not hung.
  EXPECT_FALSE(judgeHang(
      {rank(0, std::nullopt, 5s), rank(1, std::nullopt, 5s), rank(2, std::nullopt, 1s)}, kNow, 3s));
  auto v = judgeHang({rank(0, std::nullopt, 5s), rank(1, std::nullopt, 2s)}, kNow, 3s);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->stuck, (std::vector<int>{0, 1}));
  EXPECT_EQ(v->message,
            "ranks 0, 1 made no progress for 5 s (no heartbeats: neither output nor their main "
            "thread's CPU time moved)");
}

TEST(StuckByStacks, RanksOutsideCollectivesAreTheStuckOnes) {
  const std::string inAllReduce =
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541 "
      "in all_reduce\n";
  const std::string sleeping = "  File \"/tmp/w.py\", line 6 in <module>\n";
  const std::string cppWaiting = "./w(accel::comm::ShmGroup::wait()+0x2c)[0x1]\n";
  std::map<int, std::string> stacks = {{0, inAllReduce}, {1, sleeping}, {2, cppWaiting}};
  auto v = judgeByStacks({0, 1, 2}, stacks);
  EXPECT_EQ(v.stuck, std::vector<int>{1});
  EXPECT_EQ(v.why, "rank 1 outside any collective, 0, 2 waiting in one");
  // A rank without a stack cannot be cleared.
  EXPECT_EQ(judgeByStacks({0, 1, 3}, stacks).stuck, (std::vector<int>{1, 3}));
  // Both in collectives, and two cannot have an odd one out: the stacks cannot tell who, and say
  // where each waits when that differs (a mismatch of collectives), else only that they cannot.
  v = judgeByStacks({0, 2}, stacks);
  EXPECT_TRUE(v.stuck.empty());
  EXPECT_EQ(
      v.why,
      "they do not tell which rank is stuck: all wait in collectives, but not the same one "
      "(rank 0 at File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", "
      "line 1541 in all_reduce; rank 2 at ./w(accel::comm::ShmGroup::wait()+0x2c)): "
      "ranks calling different collectives, as with uneven batches");
  stacks[3] = inAllReduce;
  v = judgeByStacks({0, 3}, stacks);
  EXPECT_TRUE(v.stuck.empty());
  EXPECT_EQ(v.why,
            "they do not tell which rank is stuck (all in collectives, and no one stack differs "
            "from all the others)");
  EXPECT_EQ(judgeByStacks({2}, stacks).stuck, std::vector<int>{2});  // one candidate stays
}

// faulthandler's dump of a python3-torch DDP rank (every thread; the one that caught SIGABRT is
// "Current thread").
std::string faultDump(const std::string& mainFrames, const std::string& otherThread = "") {
  std::string dump = "Fatal Python error: Aborted\n\n";
  if (!otherThread.empty())
    dump += "Thread 0x00007f2a11bfe640 (most recent call first):\n" + otherThread + "\n";
  return dump + "Current thread 0x00007f2a3c4b2040 (most recent call first):\n" + mainFrames +
         "\nExtension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n";
}

// Issue 36: rank 1 of 4 sleeps before DDP's backward; the others wait inside backward, where
// DDP's reducer all-reduces (torch 1.13 and 2.6 frames) — not in torch/distributed.
TEST(StuckByStacks, WaitingInsideDdpBackwardIsWaiting) {
  const std::string backward113 =
      "  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", line 197 in "
      "backward\n  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 487 in "
      "backward\n  File \"/tmp/ddp.py\", line 30 in <module>\n";
  const std::string backward26 =
      "  File \"/usr/lib/python3/dist-packages/torch/autograd/graph.py\", line 823 in "
      "_engine_run_backward\n  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", "
      "line 347 in backward\n  File \"/tmp/ddp.py\", line 30 in <module>\n";
  const std::string preForward =
      "  File \"/usr/lib/python3/dist-packages/torch/nn/parallel/distributed.py\", line 1446 in "
      "_pre_forward\n  File \"/tmp/ddp.py\", line 28 in <module>\n";
  const std::string sleeping = "  File \"/tmp/ddp.py\", line 29 in <module>\n";
  for (const auto& waiting : {backward113, backward26, preForward}) {
    auto v = judgeByStacks({0, 1, 2, 3}, {{0, faultDump(waiting)},
                                          {1, faultDump(sleeping)},
                                          {2, faultDump(waiting)},
                                          {3, faultDump(waiting)}});
    EXPECT_EQ(v.stuck, std::vector<int>{1}) << waiting;
    EXPECT_EQ(v.why, "rank 1 outside any collective, 0, 2, 3 waiting in one");
  }
  // Another thread in torch.distributed does not make a sleeping main thread wait.
  EXPECT_FALSE(stackShowsCollective(faultDump(
      sleeping, "  File \"/x/torch/distributed/distributed_c10d.py\", line 1 in all_reduce\n")));
  EXPECT_EQ(innermostFrame(faultDump(backward26)),
            "  File \"/usr/lib/python3/dist-packages/torch/autograd/graph.py\", line 823 in "
            "_engine_run_backward");
}

// No stack in a collective (or all in one): the one rank whose stack differs is the culprit;
// when none differs alone, nobody is named.
TEST(StuckByStacks, TheOnlyStackThatDiffersElseNobody) {
  const std::string stepA = "  File \"/tmp/t.py\", line 40 in <module>\n";
  const std::string stepB = "  File \"/tmp/t.py\", line 12 in load\n";
  auto v = judgeByStacks({0, 1, 2},
                         {{0, faultDump(stepA)}, {1, faultDump(stepA)}, {2, faultDump(stepB)}});
  EXPECT_EQ(v.stuck, std::vector<int>{2});
  EXPECT_EQ(v.why, "rank 2 the only one elsewhere, 0, 1 all at the same place");
  v = judgeByStacks(
      {0, 1, 2, 3},
      {{0, faultDump(stepA)}, {1, faultDump(stepA)}, {2, faultDump(stepB)}, {3, faultDump(stepB)}});
  EXPECT_TRUE(v.stuck.empty());
  EXPECT_EQ(v.why,
            "they do not tell which rank is stuck (none in a collective, and no one stack differs "
            "from all the others)");
}

TEST(DemangleStack, NamesCppFramesAndLeavesTheRest) {
  EXPECT_EQ(demangleStack("./w(_Z19stuckBeforeBackwardPKc+0x2c)[0x55]\n./"
                          "w(+0x3a)[0x56]\nlibc.so.6(nanosleep+0x13)[0x7]\n"),
            "./w(stuckBeforeBackward(char "
            "const*)+0x2c)[0x55]\n./w(+0x3a)[0x56]\nlibc.so.6(nanosleep+0x13)[0x7]\n");
  EXPECT_EQ(demangleStack("./w(_Znotmangled+0x1)"), "./w(_Znotmangled+0x1)");
}

// A native dump as libaccel writes it (its heading, the frames from the interrupted instruction
// on): the frame named is the first outside the C library and the loader, demangled, without its
// absolute address (which differs from process to process), so two ranks at one place compare
// equal; a dump without symbols says how to get them.
TEST(FrameOfInterest, TheFirstFrameOutsideLibcDemangled) {
  const std::string dump =
      "accel: stack of pid 41 (thread 41) on SIGABRT:\n"
      "/lib/x86_64-linux-gnu/libc.so.6(+0x8e9a0) [0x7f01]\n"
      "/lib/x86_64-linux-gnu/libc.so.6(pthread_cond_wait+0x1b0) [0x7f02]\n"
      "./mytrain(_ZN5accel11Accelerator8backwardERKN2at6TensorE+0x2a) [0x5501]\n"
      "./mytrain(main+0x10) [0x5502]\n";
  EXPECT_EQ(frameOfInterest(dump),
            "./mytrain(accel::Accelerator::backward(at::Tensor const&)+0x2a)");
  std::string other = dump;
  other.replace(other.find("pid 41 (thread 41)"), 18, "pid 42 (thread 42)");
  other.replace(other.find("[0x5501]"), 8, "[0x6601]");
  EXPECT_EQ(innermostFrame(other), innermostFrame(dump));  // the same place in another rank
  EXPECT_FALSE(frameWithoutSymbol(frameOfInterest(dump)));
  EXPECT_TRUE(
      frameWithoutSymbol(frameOfInterest("accel: stack of pid 1:\n./w(+0x8988a) [0x55]\n")));
  EXPECT_EQ(frameOfInterest("accel: stack of pid 1:\nlibc.so.6(+0x1) [0x7]\n"), "libc.so.6(+0x1)");
  EXPECT_EQ(frameOfInterest(""), "");
}

TEST(RankRanges, RunsOfThreeOrMoreBecomeRanges) {
  EXPECT_EQ(rankRanges({}), "");
  EXPECT_EQ(rankRanges({3}), "3");
  EXPECT_EQ(rankRanges({1, 0}), "0, 1");
  EXPECT_EQ(rankRanges({7, 0, 1, 2, 4, 5, 6, 9}), "0\u20132, 4\u20137, 9");
}

TEST(ProgressBoard, KeepsEachRanksStepAndWhenItChanged) {
  ProgressBoard board;
  board.onWrite(storedHeartbeatPrefix() + "3", "41");
  board.onWrite("/accel_step/x", "1");                   // not a rank
  board.onWrite("/other/3", "1");                        // not a heartbeat
  board.onWrite(storedHeartbeatPrefix() + "2", "many");  // not a count
  auto first = board.snapshot();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first.at(3).step, 41);
  board.onWrite("/" + heartbeatKey(3), "41");  // the same step again: it did not move
  EXPECT_EQ(board.snapshot().at(3).changed, first.at(3).changed);
  board.onWrite("/" + heartbeatKey(3), "42");
  EXPECT_EQ(board.snapshot().at(3).step, 42);
  EXPECT_GE(board.snapshot().at(3).changed, first.at(3).changed);
  board.clear();
  EXPECT_TRUE(board.snapshot().empty());
}

TEST(ReadProcSample, ThisProcess) {
  volatile double spin = 0;
  for (int i = 0; i < 20000000; ++i) spin = spin + i;  // some CPU time of our own
  auto s = readProcSample(::getpid());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'R');
  EXPECT_GT(s->cpu_ticks, 0u);
  EXPECT_GT(s->rss_bytes, 1u << 20);
  EXPECT_FALSE(readProcSample(-1));
}

// Spins until the calling thread used `ms` of CPU time.
void burnThreadCpu(int ms) {
  timespec start{}, now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  volatile double spin = 0;
  do {
    for (int i = 0; i < 100000; ++i) spin = spin + i;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

// A background thread's CPU time moves the process's ticks, not the main thread's; the main
// thread's own work moves both.
TEST(ReadProcSample, TheMainThreadApartFromTheOthers) {
  const auto before = readProcSample(::getpid());
  ASSERT_TRUE(before);
  std::thread([] { burnThreadCpu(300); }).join();
  const auto afterBackground = readProcSample(::getpid());
  ASSERT_TRUE(afterBackground);
  const uint64_t ticks300ms = static_cast<uint64_t>(clockTicksPerSecond()) * 3 / 10;
  EXPECT_GE(afterBackground->cpu_ticks, before->cpu_ticks + ticks300ms - 2);
  EXPECT_LE(afterBackground->main_thread_ticks, before->main_thread_ticks + 2);
  burnThreadCpu(300);
  const auto afterMain = readProcSample(::getpid());
  ASSERT_TRUE(afterMain);
  EXPECT_GE(afterMain->main_thread_ticks, afterBackground->main_thread_ticks + ticks300ms - 2);
  EXPECT_EQ(afterMain->main_thread_state, 'R');
}

}  // namespace
}  // namespace accel::launcher
