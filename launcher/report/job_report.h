#pragma once
// What happened to a job: every attempt, every worker's end, and who was to blame. Rendered as
// the one failure block on the console and as <log_dir>/summary.json.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace accel::launcher {

struct WorkerOutcome {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  int exit_code = 0;                     // 128+N when killed by signal N
  int signal = 0;                        // 0 when it exited by itself
  bool stopped_by_agent = false;         // the agent signalled it before it ended (collateral)
  bool needed_sigkill = false;           // it outlived the grace period
  double ended_after_s = 0;              // seconds since the attempt started
  std::vector<std::string> stderr_tail;  // last lines of its stderr
  std::string error_file_message;        // from TORCHELASTIC_ERROR_FILE, if the worker wrote one
  std::string stack;         // what it printed after the agent asked for its stack ("": not asked)
  bool stack_asked = false;  // the agent sent it SIGABRT for its stack (hang or exit guard)
};

// The exit code of a job the agent stopped because it hung (as timeout(1)'s).
inline constexpr int kHungExitCode = 124;

// Why the agent stopped a job that was not failing but not moving either.
struct HangReport {
  std::string kind;              // "hang" (--hang_timeout) or "exit" (--exit_timeout)
  std::string message;           // "rank 2 at step 4 for 10 s; ranks 0–1, 3 at step 5"
  std::vector<int> stuck_ranks;  // global ranks (the first one here is the culprit)
  double timeout_s = 0;
  double detected_at = 0;  // when the agent called it, in seconds since the epoch
};

// The first failure of a multi-machine job, as its agent publishes it to the others: a worker's
// end, or something that is not a worker's (an agent stopped by a signal, the master lost).
struct JobFailure {
  int machine_rank = -1;
  std::string host;
  int rank = -1;  // -1: not a worker's failure (see reason)
  int local_rank = -1;
  long pid = 0;
  int exit_code = 1;  // what every agent of the job exits with
  int signal = 0;
  std::string reason;  // for failures that are not a worker's: "its agent received SIGTERM"
  // Why the group changes, for failures that are not a worker's: "" (a worker, an agent told
  // to stop, the master lost) or kCauseLost (the machine's agent is gone, or it stopped sending
  // keep-alives). A machine waiting to join is no failure (AttemptReport::regrouped).
  std::string cause;
  bool hung = false;  // the agent stopped the job because it hung (exit_code is kHungExitCode)
  double ended_after_s = 0;
  std::vector<std::string> stderr_tail;
  std::string error_file_message;
};

inline constexpr const char* kCauseLost = "lost";

// "rank 3 on machine 1 (hostB): exit code 7", "machine 1 (hostB): its agent received SIGTERM".
std::string describeFailure(const JobFailure& failure);
// The same for a job of one machine, which needs no machine named: "rank 3: exit code 7".
std::string describeLocalFailure(const JobFailure& failure);
nlohmann::json failureToJson(const JobFailure& failure);
// Throws nlohmann::json::exception on a malformed record.
JobFailure failureFromJson(const nlohmann::json& j);

// One rank's straggler score over its last steps (launcher/supervise/stragglers.h).
struct StragglerScore {
  int rank = 0;
  int machine = 0;        // its machine in the round
  double work_s = 0;      // its own work per step (the step less its waits in collectives)
  double score = 1;       // the job's median work per step over its own, at most 1
  int64_t from_step = 0;  // the steps measured: from_step to to_step
  int64_t to_step = 0;
};
// [{rank, machine, work_s, score, from_step, to_step}] (summary.json, `accel status`).
nlohmann::json stragglerScoresJson(const std::vector<StragglerScore>& scores);

struct AttemptReport {
  int attempt = 0;                     // the round's number (its attempt_K directory)
  std::vector<WorkerOutcome> workers;  // by local rank
  std::optional<size_t> culprit;       // index of the first worker to fail
  int agent_signal = 0;                // a signal the agent received and forwarded (0: none)
  bool oom_suspected = false;          // the cgroup's oom_kill count rose during the attempt
  double duration_s = 0;
  std::optional<double> stop_s;  // culprit's end → last collateral worker's end
  // Multi-machine jobs: the job's first failure when it happened on another machine (it is then
  // the culprit, and `culprit`, if any, failed after it); `told_others` when this machine's
  // failure was published as the job's first.
  std::optional<JobFailure> remote_culprit;
  bool told_others = false;
  // Multi-machine jobs: the attempt's first failure as the job's store holds it (this machine's
  // or another's), read once the attempt ended; the same on every machine.
  std::optional<JobFailure> job_failure;
  std::optional<HangReport> hang;  // the agent found the job hung and stopped it
  // Multi-machine jobs: the attempt stopped, with no failure, for the group to re-form around a
  // machine that waits to join (why: "a machine is waiting to join ...").
  std::optional<std::string> regrouped;
  bool regrouped_said = false;  // this agent said `regrouped` when it stopped its workers

  // The highest heartbeat step any rank began (ranks ADD 1 as each step begins; 0: none sent):
  // 2 or more means some rank completed a step (progressed()).
  int64_t max_step = 0;
  bool printed = false;  // some rank of this machine wrote to its stdout

  // The ranks sent heartbeats: the agent sees their steps.
  bool heartbeats() const { return max_step > 0; }
  // What the agent can tell of progress (the no-blind-retry rule's): with heartbeats, some rank
  // completed a step (it began a second one); without them (a plain script), the agent sees no
  // step, and some rank writing to stdout is taken as progress — a crash at import writes only
  // its traceback, to stderr.
  bool progressed() const { return heartbeats() ? max_step >= 2 : printed; }

  bool succeeded() const {
    return !culprit && agent_signal == 0 && !remote_culprit && !hang && !regrouped;
  }

  // The agent that hosts the job's store: the ranks' straggler scores when the attempt ended
  // (launcher/supervise/stragglers.h), and the ranks it named stragglers during it, in order.
  std::vector<StragglerScore> straggler_scores;
  std::vector<int> stragglers;
  // Multi-machine jobs: the machine the round's stop excluded from the next rounds (a straggler's,
  // --straggler_action exclude; -1: none). `regrouped` says why.
  int excluded_machine = -1;
};

// One health check this machine ran before it joined its last round (probes/health.h).
struct HealthRecord {
  std::string name;  // "disk DIR", "/dev/shm", "command"
  bool passed = true;
  std::string detail;
  int64_t took_ms = 0;
};

struct JobReport {
  std::vector<AttemptReport> attempts;
  int exit_code = 0;  // the last attempt's culprit's code, 0 on success
  // The restart count of the last round (its TORCHELASTIC_RESTART_COUNT): the restarts the job
  // spent of its budget. Rounds that re-formed the group for a machine that joined are attempts
  // but not restarts.
  int restarts_used = 0;
  std::vector<std::string> hints;  // printed as "hint: ..." in the failure summary
  // The checks before this machine's last round of a multi-machine job (none otherwise).
  std::vector<HealthRecord> health_checks;
};

// The failure block printed at the end of a failed job ("" for a successful one), titled by what
// ended it (failed, interrupted by Ctrl-C, stopped by a signal). Names the culprit, its exit
// code or signal, an OOM hint, its stderr tail, the collateral ranks, and where the logs and
// summary.json are (`logDir`; "" when the run kept none).
std::string renderFailureSummary(const JobReport& report, const std::string& logDir = "");
// The summary in two parts, for an agent that still waits between them (the exit barrier): all
// but its last two lines, and those ("accel launch exits with N" and the closing rule; `command`:
// the command the user ran, "accel run" for torchrun's command line).
std::string renderSummaryBody(const JobReport& report, const std::string& logDir = "");
std::string renderSummaryEnd(const JobReport& report, const std::string& command = "accel launch");

// The failure summary for a colour terminal: the banner lines bold red, the culprit red, hints
// cyan (ANSI escapes); everything else as it was.
std::string colourSummary(const std::string& summary);

// The same facts as JSON (for <log_dir>/summary.json), successful jobs included.
nlohmann::json renderReportJson(const JobReport& report);
// Health checks as JSON: [{name, passed, detail, took_ms}] (summary.json, `accel status`).
nlohmann::json healthJson(const std::vector<HealthRecord>& checks);

// The culprit of the last attempt ended with a stderr line containing `text` (in its tail).
bool culpritSaid(const JobReport& report, const std::string& text);

// For a job of one process started without torchrun's variables (`withoutRank`: accelerate's
// simple launcher) whose culprit died of torch's "environment variable RANK expected, but not
// set": how to give it a process group (-n 2, or a config). nullopt otherwise.
std::optional<std::string> missingRankHint(const JobReport& report, bool withoutRank);

// For a culprit that died of "use_libuv was requested but PyTorch was build without libuv
// support" (Debian's python3-torch 2.x: torch's env:// rendezvous under an agent store, torchrun's
// or accel's, asks for libuv): what to do. nullopt otherwise.
std::optional<std::string> noLibuvHint(const JobReport& report);

// "exit code 3" or "signal SIGSEGV (exit code 139)".
std::string describeEnd(const WorkerOutcome& worker);

// The attempt's own failure as this machine saw it (nullopt when it succeeded): its culprit
// worker (hung: the agent stopped the job as hung), else its agent's signal. The rank, local rank
// and stderr tail are the culprit's; `machineRank` and `host` name this machine.
std::optional<JobFailure> failureOf(const AttemptReport& attempt, int machineRank,
                                    const std::string& host);

// Why restarting again would be blind: the first failures of two rounds in a row are workers'
// (not hangs, not agents stopped), no rank of either round made progress (`progress`:
// AttemptReport::progressed(); `heartbeats`: it was judged by heartbeats, else by stdout, and the
// message says which), and they failed the same way: the same exit code or signal
// and the same last stderr line — a crash at start-up that a restart repeats. Which rank failed
// is not compared: whichever rank ends first is the culprit, and a machine may get another
// global rank in the next round. nullopt when they differ or a rank made progress.
// `describe` words a failure for the message ("rank 0: exit code 1").
std::optional<std::string> repeatedFailure(int previousAttempt, const JobFailure& previous,
                                           bool previousProgress, int lastAttempt,
                                           const JobFailure& last, bool lastProgress,
                                           bool heartbeats, const std::string& describedLast);

// The job's exit code from its last attempt: 124 for a hang, else the culprit's code (another
// machine's, or this one's; 128+N for signal N), else 128+N when the agent was stopped by signal
// N, else 0.
int jobExitCode(const AttemptReport& last);

}  // namespace accel::launcher
