#pragma once
// Supervisor: runs one attempt of a job on this machine — spawns the workers, streams their
// output, reacts to their exits and to signals sent to the agent — from one epoll loop over a
// signalfd and the workers' pipes (no polling, no threads).
//
// Failure policy (torchrun's, with the culprit kept apart from its victims): the first worker
// to exit non-zero or by a signal, while the agent itself was not told to stop, is the culprit;
// every other worker's process group gets SIGTERM, then SIGKILL after the grace period.
// Signals to the agent: SIGINT is forwarded (a second one sends SIGTERM, a third SIGKILL);
// SIGTERM, SIGHUP and SIGQUIT are forwarded and end the attempt (SIGKILL after the grace
// period); SIGUSR1/SIGUSR2 are forwarded and the job goes on.
// Nothing outlives an attempt: leftover descendants (adopted as subreaper) are killed, and a
// guard process kills the workers' groups if the agent itself is SIGKILLed.

#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>

#include "launcher/job_report.h"
#include "launcher/launch_plan.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// Multi-machine jobs: how the agent hears of a failure on another machine, and tells the
// others of its own (through the job's store; see launcher/job_link.h).
struct JobEvents {
  int fd = -1;  // readable once the job's first failure is published, or the store is gone
  // Called when fd is readable: the job's first failure, or nullopt when it is this machine's.
  std::function<std::optional<JobFailure>()> read;
  // Publishes this machine's first failure; returns the job's first failure when another
  // machine's came before it (nullopt: this one is the job's first).
  std::function<std::optional<JobFailure>(const JobFailure&)> publish;
  int machine_rank = 0;
  std::string host;
};

class Supervisor {
 public:
  // `runDir` holds attempt_K/rank_N/{stdout.log,stderr.log,error.json}; logs are written there
  // only when the plan has a log_dir.
  Supervisor(const LaunchPlan& plan, Environment parentEnv, std::string runDir);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // The run directory is the agent's own (a temporary one): if the agent is SIGKILLed, the guard
  // deletes it after killing the workers. Call before start().
  void removeRunDirIfKilled() { remove_run_dir_ = true; }

  // Blocks the handled signals (they arrive through the signalfd), becomes subreaper and starts
  // the guard. Call once, before runAttempt, from a single-threaded process.
  Expected<void> start();

  // The store's port, given to workers as MASTER_PORT. Call before runAttempt.
  void setMasterPort(int port) { master_port_ = port; }

  // Global rank of this machine's local rank 0 (from the rendezvous). Call before runAttempt.
  void setRankOffset(int offset) { plan_.rank_offset = offset; }

  // Links this machine to the others of a multi-machine job. Call before runAttempt.
  void setJobEvents(JobEvents events) { events_ = std::move(events); }

  // Runs attempt `attempt` to its end. Blocking; returns when every worker has ended and no
  // descendant is left.
  AttemptReport runAttempt(int attempt);

  // True once the agent received a signal that ends the job (no restart after it).
  bool stopRequested() const { return stop_requested_; }

  // Tells the guard the job ended cleanly and restores the signal mask.
  void finish();

 private:
  struct Worker;
  void handleSignals(AttemptReport& report, std::vector<Worker>& workers);
  void onWorkerExit(AttemptReport& report, std::vector<Worker>& workers, size_t index, int exitCode, int signal);
  void signalRunning(std::vector<Worker>& workers, int sig, bool collateral);
  void killLeftovers(std::vector<Worker>& workers);
  void onRemoteFailure(AttemptReport& report, std::vector<Worker>& workers);
  void tellGuard(const std::string& line);

  JobEvents events_;
  bool watching_ = false;  // events_.fd is in the epoll set
  LaunchPlan plan_;
  Environment parent_env_;
  int master_port_ = 0;
  std::string run_dir_;
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  pid_t guard_pid_ = -1;
  int guard_fd_ = -1;
  bool remove_run_dir_ = false;
  bool stop_requested_ = false;
  int interrupts_ = 0;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point kill_deadline_{};
  std::chrono::steady_clock::time_point attempt_start_{};
  std::optional<std::chrono::steady_clock::time_point> culprit_end_;
};

}  // namespace accel::launcher
