#include "launcher/report/job_report.h"

#include <csignal>

#include <gtest/gtest.h>

namespace accel::launcher {
namespace {

WorkerOutcome worker(int rank, int code, int sig = 0, bool collateral = false) {
  WorkerOutcome w;
  w.rank = rank;
  w.local_rank = rank;
  w.pid = 100 + rank;
  w.exit_code = code;
  w.signal = sig;
  w.stopped_by_agent = collateral;
  w.ended_after_s = 1.5;
  return w;
}

// The line of `text` that contains `part` ("" when none does).
std::string lineWith(const std::string& text, const std::string& part) {
  const size_t at = text.find(part);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) + 1, end = text.find('\n', at);
  return text.substr(begin, end - begin);
}

TEST(JobReportTest, SuccessHasNoSummary) {
  JobReport r;
  AttemptReport a;
  a.workers = {worker(0, 0), worker(1, 0)};
  a.duration_s = 2.0;
  r.attempts.push_back(a);
  EXPECT_EQ(renderFailureSummary(r), "");
  EXPECT_TRUE(renderReportJson(r).at("succeeded").get<bool>());
}

// Ranks that ended with an exit code of their own while the agent stopped them (the same
// import error, their own traceback about the culprit's closed connection) are not its
// collateral: they are named apart, by exit code; those its signal ended are collateral.
TEST(JobReportTest, RanksThatFailedOnTheirOwnAreNotCollateral) {
  AttemptReport a;
  a.workers = {worker(0, 1),          worker(1, 1, 0, true), worker(2, 143, SIGTERM, true),
               worker(3, 2, 0, true), worker(4, 1, 0, true), worker(5, 143, 0, true)};
  a.culprit = 0;
  a.stop_s = 0.25;
  JobReport r{{a}, 1, 0, {}, {}};
  const std::string s = renderFailureSummary(r);
  EXPECT_NE(s.find("also failed on their own: ranks 1, 4 (exit code 1)\n"
                   "also failed on their own: rank 3 (exit code 2)\n"
                   "stopped by the agent (collateral): ranks 2, 5 in 0.25 s\n"),
            std::string::npos)
      << s;
}

// A hang whose stacks could not tell the stuck rank (judgeByStacks): the summary says so, shows
// every stack whole and names no culprit (it used to name the first rank).
TEST(JobReportTest, HangTheStacksCannotTellNamesNoCulprit) {
  AttemptReport a;
  a.workers = {worker(0, 134, SIGABRT, true), worker(1, 134, SIGABRT, true)};
  for (auto& w : a.workers) {
    w.stack_asked = true;
    w.stack = "Current thread 0x1 (most recent call first):\n  File \"/t.py\", line 3 in f\n";
  }
  a.hang = HangReport{"hang",
                      "ranks 0, 1 made no progress for 3 s; by their stacks they do not tell which "
                      "rank is stuck (none in a collective, and no one stack differs from all the "
                      "others)",
                      {0, 1},
                      3,
                      0};
  a.duration_s = 5;
  JobReport r{{a}, 124, 0, {}, {}};
  const std::string s = renderFailureSummary(r);
  EXPECT_NE(s.find("the job hung: ranks 0, 1 made no progress for 3 s; by their stacks they do not "
                   "tell which rank is stuck"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("culprit:"), std::string::npos) << s;
  EXPECT_NE(s.find("  stack of rank 0 (pid 100):\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  stack of rank 1 (pid 101):\n"), std::string::npos) << s;
  EXPECT_NE(s.find("stopped by the agent (collateral): ranks 0, 1"), std::string::npos) << s;
  EXPECT_NE(s.find("accel launch exits with 124"), std::string::npos) << s;
}

// Hints read from the culprit's last stderr lines: a single process without RANK, a torch
// without libuv; none for another failure.
TEST(JobReportTest, HintsFromTheCulpritsStderr) {
  AttemptReport a;
  a.workers = {worker(0, 1)};
  a.culprit = 0;
  a.workers[0].stderr_tail = {
      "ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
      "variable RANK expected, but not set"};
  JobReport r{{a}, 1, 0, {}, {}};
  EXPECT_EQ(missingRankHint(r, true),
            "one process gets no RANK or WORLD_SIZE (as under accelerate launch), so "
            "init_process_group has no group to join: run several with --num_processes 2 (-n 2), "
            "or write a config with `accel config`");
  EXPECT_EQ(missingRankHint(r, false), std::nullopt);  // accel gave it torchrun's variables
  EXPECT_EQ(noLibuvHint(r), std::nullopt);
  r.attempts[0].workers[0].stderr_tail = {
      "RuntimeError: use_libuv was requested but PyTorch was build without libuv support"};
  EXPECT_EQ(missingRankHint(r, true), std::nullopt);
  auto hint = noLibuvHint(r);
  ASSERT_TRUE(hint);
  EXPECT_NE(hint->find("this torch was built without libuv (Debian's python3-torch 2.x)"),
            std::string::npos);
}

TEST(JobReportTest, FailureNamesCulpritTailOomAndCollateral) {
  AttemptReport a;
  a.attempt = 0;
  a.workers = {worker(0, 143, SIGTERM, true), worker(1, 137, SIGKILL),
               worker(2, 137, SIGKILL, true), worker(3, 0)};
  a.workers[1].stderr_tail = {"allocating", "more"};
  a.workers[2].needed_sigkill = true;
  a.culprit = 1;
  a.oom_suspected = true;
  a.duration_s = 3.25;
  a.stop_s = 0.5;
  JobReport r{{a}, 137, 0, {}, {}};
  std::string s = renderFailureSummary(r);
  EXPECT_NE(s.find("attempt 0 (3.25 s): rank 1 failed with signal SIGKILL (exit code 137)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("culprit: rank 1 (local rank 1, pid 101) — first to fail, signal SIGKILL (exit "
                   "code 137), after "
                   "1.50 s\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("  likely killed by the OOM killer"), std::string::npos) << s;
  EXPECT_NE(s.find("  last 2 line(s) of its stderr:\n    | allocating\n    | more\n"),
            std::string::npos)
      << s;
  EXPECT_NE(
      s.find(
          "stopped by the agent (collateral): ranks 0, 2 in 0.50 s; SIGKILL needed for rank 2\n"),
      std::string::npos)
      << s;
  EXPECT_NE(s.find("finished before the failure: rank 3\n"), std::string::npos) << s;
  EXPECT_NE(s.find("accel launch exits with 137\n"), std::string::npos) << s;
  // In two parts for an agent that waits between them: the exit line and the rule come last.
  EXPECT_EQ(renderSummaryBody(r) + renderSummaryEnd(r), s);
  EXPECT_EQ(renderSummaryBody(r).find("accel launch exits with"), std::string::npos);
  EXPECT_EQ(renderSummaryEnd(r),
            "accel launch exits with 137\n"
            "====================================================================\n");

  auto j = renderReportJson(r);
  EXPECT_EQ(j.at("attempts").at(0).at("culprit").at("rank"), 1);
  EXPECT_EQ(j.at("attempts").at(0).at("culprit").at("signal"), "SIGKILL");
  EXPECT_TRUE(j.at("attempts").at(0).at("oom_suspected").get<bool>());
}

// An attempt stopped for a machine that joins is no failure: its line says so, summary.json has
// it as "regrouped" with no culprit, and it is not a success either (the job went on).
TEST(JobReportTest, AnAttemptStoppedForAJoiningMachineIsNoFailure) {
  AttemptReport regrouped;
  regrouped.attempt = 0;
  regrouped.workers = {worker(0, 143, SIGTERM, true)};
  regrouped.duration_s = 2.0;
  regrouped.regrouped = "a machine is waiting to join (the group has 2 of at most 3)";
  EXPECT_FALSE(regrouped.succeeded());
  EXPECT_EQ(jobExitCode(regrouped), 1);  // ended there: the group did not re-form
  AttemptReport failed;
  failed.attempt = 1;
  failed.workers = {worker(0, 3)};
  failed.culprit = 0;
  failed.duration_s = 1.0;
  JobReport r{{regrouped, failed}, 3, 0, {}, {}};
  const std::string s = renderFailureSummary(r);
  EXPECT_NE(s.find("attempt 0 (2.00 s): stopped for the group to re-form: a machine is waiting to "
                   "join (the group has 2 of at most 3)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("attempt 1 (1.00 s): rank 0 failed with exit code 3\n"), std::string::npos) << s;
  auto j = renderReportJson(r);
  EXPECT_EQ(j.at("attempts").at(0).at("regrouped"), *regrouped.regrouped);
  EXPECT_TRUE(j.at("attempts").at(0).at("culprit").is_null());
  EXPECT_TRUE(j.at("attempts").at(0).at("job_failure").is_null());
  EXPECT_TRUE(j.at("attempts").at(1).at("regrouped").is_null());
}

TEST(JobReportTest, AgentSignalWithoutCulprit) {
  AttemptReport a;
  a.workers = {worker(0, 130, 0, false)};
  a.agent_signal = SIGINT;
  JobReport r{{a}, 130, 0, {}, {}};
  std::string s = renderFailureSummary(r, "/tmp/logs/run-1");
  EXPECT_NE(s.find("stopped by SIGINT sent to the agent"), std::string::npos) << s;
  EXPECT_EQ(s.find("culprit:"), std::string::npos) << s;
  // Titled as what it was, not as a failure; the logs named.
  EXPECT_EQ(lineWith(s, " accel: job interrupted (Ctrl-C) "),
            std::string(17, '=') + " accel: job interrupted (Ctrl-C) " + std::string(18, '='));
  EXPECT_NE(s.find("logs: /tmp/logs/run-1 (each rank's output, summary.json)\n"), std::string::npos)
      << s;
  r.attempts[0].agent_signal = SIGTERM;
  EXPECT_NE(renderFailureSummary(r).find(" accel: job stopped (SIGTERM) "), std::string::npos);
  EXPECT_NE(renderFailureSummary(r).find(
                "no logs kept (--log_dir DIR keeps each rank's output and summary.json)\n"),
            std::string::npos);
}

TEST(JobReportTest, EveryBannerLineIsAsWideAsItsClosingLine) {
  AttemptReport a;
  a.workers = {worker(0, 1)};
  a.culprit = 0;
  JobReport r{{a}, 1, 0, {}, {}};
  const std::string s = renderFailureSummary(r);
  EXPECT_EQ(lineWith(s, " accel: job failed "),
            std::string(24, '=') + " accel: job failed " + std::string(25, '='));
  EXPECT_NE(s.find("\n" + std::string(68, '=') + "\n"), std::string::npos) << s;
}

// On a colour terminal: the banners bold red, the culprit red, a hint cyan; the rest untouched.
TEST(JobReportTest, ColourMarksBannerCulpritAndHints) {
  const std::string plain =
      "\n==== accel: job failed ====\nattempt 0\nculprit: rank 1\nhint: x\n====\n";
  EXPECT_EQ(colourSummary(plain),
            "\n\033[1;31m==== accel: job failed ====\033[0m\nattempt 0\n\033[31mculprit: rank "
            "1\033[0m\n\033[36mhint: x\033[0m\n\033[1;31m====\033[0m\n");
}

}  // namespace
}  // namespace accel::launcher
