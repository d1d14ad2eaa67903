// The supervisor's rules, driven through its Processes/Clock seam by FakeWorld: who is the
// culprit, what the others get and when, what Ctrl-C does once, twice and three times, the exit
// guard, restarts and the exit code. The real processes are proven end to end (tests/e2e).
#include "launcher/supervise/supervisor.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <fstream>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "../../config/test_util.h"
#include "fake_world.h"
#include "launcher/rendezvous/solo_group.h"

namespace accel::launcher {
namespace {

using testing::FakeWorld;
using Action = FakeWorld::Action;
using Script = FakeWorld::Script;
using std::chrono::milliseconds;

class SupervisorTest : public ::testing::Test {
 protected:
  // `ranks` workers of /bin/true on one machine, torchrun's variables, a 5 s grace period.
  void SetUp() override {
    plan_.argv = {"/bin/true"};
    plan_.torchrun_env = true;
    plan_.term_timeout = milliseconds(5000);
    notices_fd_ = ::open(dir_.path().c_str(), O_TMPFILE | O_RDWR, 0600);
    ASSERT_GE(notices_fd_, 0);
  }
  void TearDown() override { ::close(notices_fd_); }

  void ranks(int n) {
    plan_.world_size = plan_.local_world_size = n;
    placement_.world_size = n;
  }

  // Runs the plan's attempts to the end against the fake world.
  JobReport run() {
    Console console(false, notices_fd_, notices_fd_);
    SupervisorParts parts(console, world_, world_);
    parts.run_dir = dir_.path();
    parts.board = &board_;
    world_.useBoard(&board_);
    auto supervisor = Supervisor::create(plan_, std::move(parts));
    EXPECT_TRUE(supervisor.ok()) << supervisor.error();
    // The agent's loop, with the group of a machine alone (as launch.cc makes it).
    SoloGroup group({plan_.max_restarts, plan_.retry_identical_failures, "here"}, placement_,
                    nullptr, [&console](const std::string& text) { console.notice(text); });
    auto first = group.meet();
    EXPECT_TRUE(first.ok());
    JobReport report = (*supervisor)->runRounds(group, *first);
    stop_requested_ = (*supervisor)->stopRequested();
    console.flush();
    return report;
  }

  // What the agent said, line by line (its notices; the workers' lines, "[rank N] ...", share
  // the console but are left out).
  std::vector<std::string> notices() const {
    std::string text(static_cast<size_t>(::lseek(notices_fd_, 0, SEEK_END)), '\0');
    ::pread(notices_fd_, text.data(), text.size(), 0);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("accel: ", 0) == 0) lines.push_back(line);
    }
    return lines;
  }

  // The signals the agent received and those it sent to running workers, in order (not the
  // tear-down's SIGKILL to every group, sent once every worker has ended).
  std::vector<Action> signalsToTheLiving() const {
    std::vector<Action> out;
    for (const auto& a : world_.actions()) {
      const bool signal = a.what.rfind("signal", 0) == 0 || a.what.rfind("agent", 0) == 0;
      if (signal && a.what.find("(ended)") == std::string::npos) out.push_back(a);
    }
    return out;
  }

  ::accel::testing::ScratchDir dir_;
  int notices_fd_ = -1;
  LaunchPlan plan_;
  Placement placement_;
  ProgressBoard board_;
  FakeWorld world_;
  bool stop_requested_ = false;
};

TEST_F(SupervisorTest, EveryWorkerSucceeding) {
  ranks(3);
  for (int r = 0; r < 3; ++r) world_.script(r, Script().exits(100 * (r + 1)));
  JobReport report = run();
  ASSERT_EQ(report.attempts.size(), 1u);
  EXPECT_TRUE(report.attempts[0].succeeded());
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_TRUE(signalsToTheLiving().empty());
  // Spawned in rank order, each with its own RANK and the attempt's restart count.
  EXPECT_EQ(world_.actionsStarting("spawn"), (std::vector<Action>{{0, "spawn rank 0 attempt 0"},
                                                                  {0, "spawn rank 1 attempt 0"},
                                                                  {0, "spawn rank 2 attempt 0"}}));
}

// The first worker to fail is the culprit; the others get SIGTERM at that moment, are
// collateral, and the job exits with the culprit's code; its stderr is in the report.
TEST_F(SupervisorTest, TheFirstFailureIsTheCulpritAndTheOthersAreStopped) {
  ranks(3);
  placement_.rank_offset = 6;  // machine 2 of a 3x3 job: global ranks 6..8
  placement_.world_size = 9;
  world_.script(6, Script().diesAfter(30));
  world_.script(7, Script().exits(400, 3).writes("loading\nValueError: boom\n"));
  world_.script(8, Script().exits(900, 5));  // later: not the culprit
  JobReport report = run();
  const AttemptReport& a = report.attempts.at(0);
  ASSERT_TRUE(a.culprit);
  EXPECT_EQ(*a.culprit, 1u);
  EXPECT_EQ(a.workers[1].rank, 7);
  EXPECT_EQ(a.workers[1].exit_code, 3);
  EXPECT_FALSE(a.workers[1].stopped_by_agent);
  EXPECT_EQ(a.workers[1].stderr_tail, (std::vector<std::string>{"loading", "ValueError: boom"}));
  for (size_t i : {0u, 2u}) {
    EXPECT_TRUE(a.workers[i].stopped_by_agent) << i;
    EXPECT_EQ(a.workers[i].exit_code, 128 + SIGTERM) << i;
    EXPECT_EQ(a.workers[i].signal, SIGTERM) << i;
    EXPECT_FALSE(a.workers[i].needed_sigkill) << i;
  }
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{400, "signal group rank 6 SIGTERM"},
                                                       {400, "signal group rank 8 SIGTERM"}}));
  EXPECT_EQ(report.exit_code, 3);
  EXPECT_NEAR(*a.stop_s, 0.03, 1e-6);  // rank 6 took 30 ms to die; rank 8 none
}

// A worker that survives SIGTERM gets SIGKILL when --term_timeout has passed since the SIGTERM,
// not before.
TEST_F(SupervisorTest, SigtermEscalatesToSigkillAfterTheGracePeriod) {
  ranks(2);
  plan_.term_timeout = milliseconds(2000);
  world_.script(0, Script().exits(100, 1));
  world_.script(1, Script().survives(SIGTERM));
  JobReport report = run();
  const AttemptReport& a = report.attempts.at(0);
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{100, "signal group rank 1 SIGTERM"},
                                                       {2100, "signal group rank 1 SIGKILL"}}));
  EXPECT_TRUE(a.workers[1].needed_sigkill);
  EXPECT_EQ(a.workers[1].exit_code, 128 + SIGKILL);
  EXPECT_EQ(report.exit_code, 1);
}

// Ctrl-C is forwarded as SIGINT; a second sends SIGTERM, a third SIGKILL. No restart after it,
// and the job's code is 128+SIGINT.
TEST_F(SupervisorTest, SigintForwardedThenSigtermThenSigkill) {
  ranks(2);
  plan_.max_restarts = 3;
  for (int r = 0; r < 2; ++r) world_.script(r, Script().survives(SIGINT).survives(SIGTERM));
  world_.signalAgentAt(100, SIGINT);
  world_.signalAgentAt(300, SIGINT);
  world_.signalAgentAt(600, SIGINT);
  JobReport report = run();
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{100, "agent receives SIGINT"},
                                                       {100, "signal group rank 0 SIGINT"},
                                                       {100, "signal group rank 1 SIGINT"},
                                                       {300, "agent receives SIGINT"},
                                                       {300, "signal group rank 0 SIGTERM"},
                                                       {300, "signal group rank 1 SIGTERM"},
                                                       {600, "agent receives SIGINT"},
                                                       {600, "signal group rank 0 SIGKILL"},
                                                       {600, "signal group rank 1 SIGKILL"}}));
  ASSERT_EQ(report.attempts.size(), 1u);  // a stop asked for is never restarted
  EXPECT_TRUE(stop_requested_);
  EXPECT_FALSE(report.attempts[0].culprit);
  EXPECT_EQ(report.attempts[0].agent_signal, SIGINT);
  EXPECT_EQ(report.exit_code, 128 + SIGINT);
  const auto said = notices();
  ASSERT_GE(said.size(), 3u);
  EXPECT_EQ(said[0],
            "accel: SIGINT forwarded to the workers (a rank blocked in a collective may not see "
            "it); Ctrl-C again sends SIGTERM, and SIGKILL follows 5 s (--term_timeout) later");
  EXPECT_EQ(said[1],
            "accel: second SIGINT: sending SIGTERM to the workers; SIGKILL to those still "
            "running 5 s (--term_timeout) later (a third Ctrl-C: at once)");
  EXPECT_EQ(said[2], "accel: third SIGINT: sending SIGKILL to the workers");
}

// Two Ctrl-Cs and workers that ignore both (blocked in a collective, or trapping them): SIGKILL
// --term_timeout after the second, with no third Ctrl-C.
TEST_F(SupervisorTest, TheSecondSigintEscalatesToSigkillAfterTheGrace) {
  ranks(2);
  plan_.term_timeout = milliseconds(3000);
  for (int r = 0; r < 2; ++r) world_.script(r, Script().survives(SIGINT).survives(SIGTERM));
  world_.signalAgentAt(100, SIGINT);
  world_.signalAgentAt(400, SIGINT);
  JobReport report = run();
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{100, "agent receives SIGINT"},
                                                       {100, "signal group rank 0 SIGINT"},
                                                       {100, "signal group rank 1 SIGINT"},
                                                       {400, "agent receives SIGINT"},
                                                       {400, "signal group rank 0 SIGTERM"},
                                                       {400, "signal group rank 1 SIGTERM"},
                                                       {3400, "signal group rank 0 SIGKILL"},
                                                       {3400, "signal group rank 1 SIGKILL"}}));
  EXPECT_TRUE(report.attempts[0].workers[0].needed_sigkill);
  EXPECT_TRUE(report.attempts[0].workers[1].needed_sigkill);
  EXPECT_EQ(report.exit_code, 128 + SIGINT);
}

// After Ctrl-C, once one rank has ended the others get --term_timeout from then, then SIGKILL
// (a rank may catch SIGINT to save a checkpoint).
TEST_F(SupervisorTest, AfterSigintTheRestGetTheGraceOnceOneEnded) {
  ranks(2);
  plan_.term_timeout = milliseconds(1000);
  world_.script(0, Script().diesAfter(50));
  world_.script(1, Script().survives(SIGINT));
  world_.signalAgentAt(100, SIGINT);
  JobReport report = run();
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{100, "agent receives SIGINT"},
                                                       {100, "signal group rank 0 SIGINT"},
                                                       {100, "signal group rank 1 SIGINT"},
                                                       {1150, "signal group rank 1 SIGKILL"}}));
  EXPECT_TRUE(report.attempts[0].workers[1].needed_sigkill);
  EXPECT_EQ(report.exit_code, 128 + SIGINT);
  const auto said = notices();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[1],
            "accel: local rank 0 ended after SIGINT; local rank 1 still runs: it gets 1 s from "
            "then (--term_timeout) to finish, then SIGKILL");
}

// Every rank ends of one Ctrl-C at once (the agent learns of the exits one by one): no notice
// about a grace that nobody needs.
TEST_F(SupervisorTest, AfterSigintNoGraceNoticeWhenEveryRankEnded) {
  ranks(3);
  world_.script(0, Script().diesAfter(50));
  world_.script(1, Script().diesAfter(50));
  world_.script(2, Script().diesAfter(120));
  world_.signalAgentAt(100, SIGINT);
  JobReport report = run();
  EXPECT_EQ(report.exit_code, 128 + SIGINT);
  EXPECT_EQ(notices(), (std::vector<std::string>{
                           "accel: SIGINT forwarded to the workers (a rank blocked in a collective "
                           "may not see it); Ctrl-C again sends SIGTERM, and SIGKILL follows 5 s "
                           "(--term_timeout) later"}));
}

// Two ranks outlive the first's end: the notice names both.
TEST_F(SupervisorTest, AfterSigintGraceNoticeNamesTheRanksStillRunning) {
  ranks(3);
  plan_.term_timeout = milliseconds(2000);
  world_.script(0, Script().survives(SIGINT));
  world_.script(1, Script().diesAfter(10));
  world_.script(2, Script().survives(SIGINT));
  world_.signalAgentAt(100, SIGINT);
  run();
  const auto said = notices();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[1],
            "accel: local rank 1 ended after SIGINT; local ranks 0, 2 still run: they get 2 s "
            "from then (--term_timeout) to finish, then SIGKILL");
}

// SIGTERM to the agent is forwarded and ends the job, with SIGKILL after the grace period.
TEST_F(SupervisorTest, SigtermToTheAgentEndsTheJob) {
  ranks(2);
  plan_.term_timeout = milliseconds(700);
  world_.script(0, Script());
  world_.script(1, Script().survives(SIGTERM));
  world_.signalAgentAt(200, SIGTERM);
  JobReport report = run();
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{200, "agent receives SIGTERM"},
                                                       {200, "signal group rank 0 SIGTERM"},
                                                       {200, "signal group rank 1 SIGTERM"},
                                                       {900, "signal group rank 1 SIGKILL"}}));
  EXPECT_EQ(report.exit_code, 128 + SIGTERM);
  EXPECT_FALSE(report.attempts[0].culprit);  // stopped, not failed
}

// SIGUSR1 (SLURM's preemption warning) goes to each worker process, and the job goes on.
TEST_F(SupervisorTest, SigusrGoesToEachWorkerProcessAndTheJobGoesOn) {
  ranks(2);
  for (int r = 0; r < 2; ++r) world_.script(r, Script().exits(1000));
  world_.signalAgentAt(300, SIGUSR1);
  JobReport report = run();
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{300, "agent receives SIGUSR1"},
                                                       {300, "signal process rank 0 SIGUSR1"},
                                                       {300, "signal process rank 1 SIGUSR1"}}));
  EXPECT_TRUE(report.attempts[0].succeeded());
  EXPECT_EQ(report.exit_code, 0);
}

// The exit guard (--exit_timeout): once a rank exited 0, the others get the timeout, checked at
// the supervisor's ticks (every 500 ms); then their stacks are asked for (SIGABRT, the process
// only) and the job is reported as hung.
TEST_F(SupervisorTest, ExitGuardStopsRanksThatOutliveACleanExit) {
  ranks(2);
  plan_.exit_timeout = milliseconds(1000);
  world_.script(0, Script().exits(100));
  world_.script(1, Script());
  JobReport report = run();
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{1500, "signal process rank 1 SIGABRT"}}));
  const AttemptReport& a = report.attempts.at(0);
  ASSERT_TRUE(a.hang);
  EXPECT_EQ(a.hang->kind, "exit");
  EXPECT_EQ(a.hang->stuck_ranks, std::vector<int>{1});
  EXPECT_EQ(*a.culprit, 1u);
  EXPECT_TRUE(a.workers[1].stack_asked);
  EXPECT_EQ(report.exit_code, kHungExitCode);
}

// Without --exit_timeout: once a rank exited 0, one notice after exit_notice (60 s by default)
// naming the ranks still running, nothing stopped, and the job ends as they do.
TEST_F(SupervisorTest, WithoutAnExitTimeoutACleanExitGetsOneNoticeAndStopsNothing) {
  ranks(3);
  plan_.exit_notice = milliseconds(60000);
  world_.script(0, Script().exits(100));
  world_.script(1, Script().exits(62100));
  world_.script(2, Script().exits(62100));
  JobReport report = run();
  EXPECT_TRUE(signalsToTheLiving().empty());
  EXPECT_EQ(notices(),
            (std::vector<std::string>{
                "accel: a rank exited 0 60 s ago; ranks 1, 2 still running (--exit_timeout "
                "S stops them after S s, with their stacks)"}));
  EXPECT_TRUE(report.attempts.at(0).succeeded());
  EXPECT_FALSE(report.attempts.at(0).hang);
  EXPECT_EQ(report.exit_code, 0);
}

// A failed attempt restarts every worker with the next restart count, until one succeeds;
// the agent's hook runs before each restart; each attempt is reported.
TEST_F(SupervisorTest, RestartsUntilAnAttemptSucceeds) {
  ranks(2);
  plan_.max_restarts = 3;
  world_.script(1, Script().exits(100, 2), /*attempt=*/0);
  world_.script(0, Script().exits(50, 9), /*attempt=*/1);
  for (int r = 0; r < 2; ++r) world_.script(r, Script().exits(70), /*attempt=*/2);
  JobReport report = run();
  ASSERT_EQ(report.attempts.size(), 3u);
  EXPECT_EQ(report.attempts[0].workers[*report.attempts[0].culprit].rank, 1);
  EXPECT_EQ(report.attempts[1].workers[*report.attempts[1].culprit].rank, 0);
  EXPECT_TRUE(report.attempts[2].succeeded());
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_EQ(report.restarts_used, 2);
  std::vector<std::string> counts;
  for (const auto& env : world_.spawnedEnvs()) {
    for (const auto& kv : env) {
      if (kv.rfind("TORCHELASTIC_RESTART_COUNT=", 0) == 0) counts.push_back(kv);
    }
  }
  EXPECT_EQ(counts.size(), 6u);
  EXPECT_EQ(counts[0], "TORCHELASTIC_RESTART_COUNT=0");
  EXPECT_EQ(counts[2], "TORCHELASTIC_RESTART_COUNT=1");
  EXPECT_EQ(counts[5], "TORCHELASTIC_RESTART_COUNT=2");
  const auto said = notices();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "accel: attempt 0 failed (rank 1: exit code 2); restarting (1 of 3)");
  EXPECT_EQ(said[1], "accel: attempt 1 failed (rank 0: exit code 9); restarting (2 of 3)");
}

// The restart budget is spent: the last attempt's culprit gives the job its code.
TEST_F(SupervisorTest, TheLastAttemptsCulpritGivesTheExitCode) {
  ranks(1);
  plan_.max_restarts = 1;
  for (int attempt = 0; attempt < 2; ++attempt) {
    world_.script(0, Script().exits(10, 40 + attempt), attempt);
  }
  JobReport report = run();
  ASSERT_EQ(report.attempts.size(), 2u);
  EXPECT_EQ(report.exit_code, 41);
}

// A worker that cannot be started is the culprit (code 127), and no later one is started.
TEST_F(SupervisorTest, AWorkerThatCannotStartIsTheCulprit) {
  ranks(3);
  world_.script(1, Script().cannotStart("cannot execute '/bin/true': Permission denied"));
  JobReport report = run();
  const AttemptReport& a = report.attempts.at(0);
  EXPECT_EQ(*a.culprit, 1u);
  EXPECT_EQ(a.workers[1].exit_code, 127);
  EXPECT_EQ(a.workers[1].stderr_tail,
            std::vector<std::string>{"cannot execute '/bin/true': Permission denied"});
  EXPECT_EQ(world_.actionsStarting("spawn").size(), 2u);  // rank 2 never started
  EXPECT_EQ(signalsToTheLiving(), (std::vector<Action>{{0, "signal group rank 0 SIGTERM"}}));
  EXPECT_EQ(report.exit_code, 127);
}

// No blind retries: a crash that repeats itself before any rank completed a step (same rank,
// same code, same last stderr line) is not restarted again.
TEST_F(SupervisorTest, AFailureThatRepeatsItselfAtStartUpIsNotRestartedAgain) {
  ranks(2);
  plan_.max_restarts = 5;
  for (int attempt = 0; attempt <= 5; ++attempt) {
    world_.script(1,
                  Script().exits(100, 1).writes(
                      "Traceback (most recent call last):\nModuleNotFoundError: No module named "
                      "'x'\n"),
                  attempt);
  }
  JobReport report = run();
  ASSERT_EQ(report.attempts.size(), 2u);
  EXPECT_EQ(report.exit_code, 1);
  const auto said = notices();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "accel: attempt 0 failed (rank 1: exit code 1); restarting (1 of 5)");
  EXPECT_EQ(said[1],
            "accel: not restarting: attempts 0 and 1 failed the same way before any rank wrote "
            "to stdout (no heartbeats: the agent sees no steps) (rank 1: exit code 1; last "
            "stderr line: ModuleNotFoundError: No module named 'x'); a restart would fail again "
            "(--retry_identical_failures retries)");
}

// The same crash at import whichever rank ends first: every rank fails alike, rank 0 first in
// one attempt and rank 1 in the next — still the same failure, not restarted a third time.
TEST_F(SupervisorTest, ARepeatedCrashIsRecognisedWhicheverRankEndsFirst) {
  ranks(2);
  plan_.max_restarts = 5;
  const std::string crash = "ModuleNotFoundError: No module named 'x'\n";
  world_.script(0, Script().exits(100, 1).writes(crash), 0);
  world_.script(1, Script().exits(150, 1).writes(crash), 0);
  world_.script(0, Script().exits(150, 1).writes(crash), 1);
  world_.script(1, Script().exits(100, 1).writes(crash), 1);
  for (int attempt = 2; attempt <= 5; ++attempt) {
    for (int r = 0; r < 2; ++r) world_.script(r, Script().exits(100, 1).writes(crash), attempt);
  }
  JobReport report = run();
  ASSERT_EQ(report.attempts.size(), 2u);
  EXPECT_EQ(report.restarts_used, 1);
  const auto said = notices();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "accel: attempt 0 failed (rank 0: exit code 1); restarting (1 of 5)");
  EXPECT_EQ(said[1],
            "accel: not restarting: attempts 0 and 1 failed the same way before any rank wrote "
            "to stdout (no heartbeats: the agent sees no steps) (rank 1: exit code 1, as rank 0 "
            "did; last stderr line: ModuleNotFoundError: No module named 'x'); a restart would "
            "fail again (--retry_identical_failures retries)");
}

// A failure that changes (code or last line), one after progress, and any failure
// with --retry_identical_failures are restarted while the budget lasts.
TEST_F(SupervisorTest, FailuresThatDifferOrFollowProgressAreRestarted) {
  ranks(2);
  plan_.max_restarts = 2;
  world_.script(0, Script().exits(50, 1).writes("ConnectionError: peer 1\n"), 0);
  world_.script(0, Script().exits(50, 1).writes("ConnectionError: peer 3\n"), 1);
  for (int r = 0; r < 2; ++r) world_.script(r, Script().exits(60), 2);
  EXPECT_EQ(run().attempts.size(), 3u);  // the last lines differ: restarted, then succeeded

  world_ = FakeWorld();
  for (int attempt = 0; attempt <= 2; ++attempt) {
    world_.script(0, Script().exits(50, 1).writes("RuntimeError: NaN\n").reachesStep(7), attempt);
  }
  EXPECT_EQ(run().attempts.size(), 3u);  // rank 0 had completed steps: the budget decides

  world_ = FakeWorld();
  plan_.retry_identical_failures = true;
  for (int attempt = 0; attempt <= 2; ++attempt) {
    world_.script(0, Script().exits(50, 1).writes("ImportError: x\n"), attempt);
  }
  JobReport report = run();
  EXPECT_EQ(report.attempts.size(), 3u);
  EXPECT_EQ(report.exit_code, 1);
}

// A plain script sends no heartbeats, so the agent sees no step: a rank that wrote to stdout
// (DDP's "step 0 loss 0.36") before the same failure counts as progress, and the budget decides,
// as under torchrun. With heartbeats, they decide: stdout without a completed step is none.
TEST_F(SupervisorTest, WithoutHeartbeatsStdoutIsProgressWithThemStepsAre) {
  ranks(2);
  plan_.max_restarts = 3;
  for (int attempt = 0; attempt <= 3; ++attempt) {
    world_.script(0,
                  Script().says("step 0 loss 0.3578\n").exits(50, 1).writes("RuntimeError: boom\n"),
                  attempt);
  }
  JobReport report = run();
  EXPECT_EQ(report.attempts.size(), 4u);  // every restart of the budget, as torchrun
  EXPECT_EQ(report.restarts_used, 3);

  world_ = FakeWorld();
  for (int attempt = 0; attempt <= 3; ++attempt) {
    world_.script(0,
                  Script()
                      .says("step 0 loss 0.3578\n")
                      .reachesStep(1)
                      .exits(50, 1)
                      .writes("RuntimeError: boom\n"),
                  attempt);
  }
  EXPECT_EQ(run().attempts.size(), 2u);  // heartbeats say no step completed: stopped after two
  const auto said = notices();
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.back().find("failed the same way before any rank completed a step ("),
            std::string::npos)
      << said.back();
}

// torch 2.12's --duplicate_stdout_filters: the teed stdout lines that contain a filter, from
// every rank, in attempt_K/filtered_stdout.log as "[<role><local rank>]:<line>"; a rank whose
// stdout is not teed is not duplicated, and the unfinished last line counts.
TEST_F(SupervisorTest, DuplicateFiltersCopyMatchingTeedLinesToTheAttemptsFile) {
  ranks(3);
  plan_.tee = {1, 1, 0};  // ranks 0 and 1 tee stdout; rank 2 does not
  plan_.duplicate_filters[0] = {"loss", "a,b"};
  world_.script(0, Script().exits(100).says("step 1 loss 0.5\nepoch done\nlast a,b"));
  world_.script(1, Script().exits(100).says("step 1 loss 0.7\n"));
  world_.script(2, Script().exits(100).says("step 1 loss 0.9\n"));
  EXPECT_EQ(run().exit_code, 0);
  std::ifstream in(dir_.path() + "/attempt_0/filtered_stdout.log");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "[default0]:step 1 loss 0.5\n[default0]:last a,b\n[default1]:step 1 loss 0.7\n");
  EXPECT_FALSE(std::ifstream(dir_.path() + "/attempt_0/filtered_stderr.log"));  // no filter
}

// A group whose meeting for round 1 brings the agent `signal` and then never forms (the other
// machines are gone): meet() blocks until interrupt(), or gives up after 10 s. With `forms`, the
// round forms at once after the signal.
class SignalledWhileMeetingGroup : public MachineGroup {
 public:
  SignalledWhileMeetingGroup(Placement placement, int signal, bool forms = false)
      : placement_(std::move(placement)), signal_(signal), forms_(forms) {}
  Expected<Placement> meet() override {
    if (++round_ == 0) return placement_;
    ::kill(::getpid(), signal_);  // e.g. Ctrl-C while this agent waits for the others
    if (forms_) return placement_;
    std::unique_lock lock(mutex_);
    if (!woken_.wait_for(lock, std::chrono::seconds(10), [this] { return interrupted_; })) {
      return makeError("round 1 did not form within 10 s");
    }
    return makeError("interrupted");
  }
  void interrupt() override {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
    woken_.notify_all();
  }
  int round() const override { return round_; }
  RoundLink* link() const override { return nullptr; }
  RoundDecision endRound(AttemptReport&, bool) override {
    return {true, "attempt 0 failed; restarting", true, 1, 0};
  }
  void closeJob(const std::string&) override {}
  void stopLink() override {}
  void awaitOtherMachines() override {}
  std::string host() const override { return "here"; }
  std::string statusKeyPrefix() const override { return ""; }

 private:
  Placement placement_;
  const int signal_;
  const bool forms_;
  int round_ = -1;
  std::mutex mutex_;
  std::condition_variable woken_;
  bool interrupted_ = false;
};

// Ctrl-C or SIGTERM while the agent waits in a later round's rendezvous ends the job at once,
// with 128 + the signal, instead of when (if ever) the round forms.
class SignalWhileMeeting : public SupervisorTest, public ::testing::WithParamInterface<int> {};

TEST_P(SignalWhileMeeting, EndsTheJobAtOnce) {
  const int sig = GetParam();
  ranks(1);
  world_.script(0, Script().exits(10, 3), 0);
  Console console(false, notices_fd_, notices_fd_);
  SupervisorParts parts(console, world_, world_);
  parts.run_dir = dir_.path();
  auto supervisor = Supervisor::create(plan_, std::move(parts));
  ASSERT_TRUE(supervisor.ok()) << supervisor.error();
  SignalledWhileMeetingGroup group(placement_, sig);
  JobReport report = (*supervisor)->runRounds(group, *group.meet());
  console.flush();
  EXPECT_EQ(report.exit_code, 128 + sig);
  EXPECT_TRUE((*supervisor)->stopRequested());
  EXPECT_EQ(report.attempts.size(), 1u);
  const auto said = notices();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "accel: attempt 0 failed; restarting");
  EXPECT_EQ(said[1],
            "accel: stopped by " + signalName(sig) + " while the machines met for the next round");
}

// SIGUSR1 (SLURM's preemption warning) while no worker runs reaches nobody: not the next
// round's workers either, for which it would come unannounced (its default action ends them).
TEST_F(SupervisorTest, SigusrWhileTheMachinesMeetIsNotSentToTheNextRoundsWorkers) {
  ranks(1);
  world_.script(0, Script().exits(10, 3), 0);
  world_.script(0, Script().exits(100), 1);
  Console console(false, notices_fd_, notices_fd_);
  SupervisorParts parts(console, world_, world_);
  parts.run_dir = dir_.path();
  auto supervisor = Supervisor::create(plan_, std::move(parts));
  ASSERT_TRUE(supervisor.ok()) << supervisor.error();
  SignalledWhileMeetingGroup group(placement_, SIGUSR1, /*forms=*/true);
  JobReport report = (*supervisor)->runRounds(group, *group.meet());
  EXPECT_EQ(report.exit_code, 0);
  ASSERT_EQ(report.attempts.size(), 2u);
  EXPECT_TRUE(report.attempts[1].succeeded());
  EXPECT_FALSE((*supervisor)->stopRequested());
  EXPECT_TRUE(signalsToTheLiving().empty()) << signalsToTheLiving().front().what;
}

INSTANTIATE_TEST_SUITE_P(CtrlCAndSigterm, SignalWhileMeeting, ::testing::Values(SIGINT, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == SIGINT ? std::string("SIGINT")
                                                    : std::string("SIGTERM");
                         });

}  // namespace
}  // namespace accel::launcher
