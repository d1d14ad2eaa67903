#pragma once
// Supervisor: runs the attempts of a job on this machine. An attempt spawns the workers, streams
// their output, reacts to their exits, to signals sent to the agent and to failures on other
// machines — from one epoll loop over a signalfd, the workers' pipes, the job link's and the
// console's event descriptors — and never blocks on the network or the terminal.
//
// Failure policy (torchrun's, with the culprit kept apart from its victims): the first worker
// to exit non-zero or by a signal, while the agent itself was not told to stop, is the culprit;
// every other worker's process group gets SIGTERM, then SIGKILL after the grace period.
// Signals to the agent: SIGINT is forwarded (a second one sends SIGTERM, a third SIGKILL);
// SIGTERM, SIGHUP and SIGQUIT are forwarded and end the attempt (SIGKILL after the grace
// period); SIGUSR1/SIGUSR2 are forwarded to each worker process (not its group: DataLoader
// workers forked before a handler was installed must not die) and the job goes on.
// Nothing outlives an attempt: leftover descendants (adopted as subreaper) are killed, and a
// guard process kills the workers' groups if the agent itself is SIGKILLed. A worker that exits
// stays unreaped (a zombie) until the attempt ends, so its process-group id, signalled at the
// end, cannot have been given to a stranger.
//
// The supervisor acts on the world through Processes (processes.h) and Clock (base/clock.h): the
// rules above are unit-tested with a fake of both (tests/launcher/supervise/supervisor_test.cc),
// the real ones end to end.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "launcher/plan/launch_plan.h"
#include "launcher/plan/placement.h"
#include "launcher/rendezvous/machine_group.h"
#include "launcher/rendezvous/round_link.h"
#include "launcher/report/job_report.h"
#include "launcher/supervise/console.h"
#include "launcher/supervise/processes.h"
#include "launcher/supervise/rank_watch.h"
#include "launcher/supervise/status_socket.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"

namespace accel::launcher {

// What a supervisor works with besides the plan; the references and pointers are not owned and
// must outlive it.
struct SupervisorParts {
  SupervisorParts(Console& console, Processes& processes, Clock& clock)
      : console(console), processes(processes), clock(clock) {}

  Console& console;      // the workers' output and every notice
  Processes& processes;  // PosixProcesses, or a test's fake
  Clock& clock;          // MonotonicClock, or a test's fake
  // `runDir` holds attempt_K/<local rank>/{stdout.log,stderr.log,error.json} (torchrun's
  // layout, launcher/plan/run_dir.h); a stream's log is written there when
  // plan.fileStreams() names it, and it reaches the console when plan.consoleStreams() does.
  std::string run_dir;
  probes::Environment parent_env;  // what the workers inherit under accel's variables
  // This machine's name in the failure it publishes to the other machines (multi-machine jobs).
  std::string host;
  // The ranks' heartbeats as the job's store sees them (machine 0's agent hosts it); nullptr:
  // progress is read from output and CPU time.
  ProgressBoard* board = nullptr;
  // Where `accel status` asks (already open), and what it tells of the job besides its ranks
  // (run id, command, machine, store); nullptr: not answered.
  StatusListener* status = nullptr;
  nlohmann::json status_facts = nlohmann::json::object();
  // The health checks before this machine's current round, as JSON (healthJson), asked from
  // the supervisor's thread for each status; unset: none ran (a one-machine job).
  std::function<nlohmann::json()> health;
};

class Supervisor {
 public:
  // Blocks the handled signals in the calling thread (they arrive through a signalfd; every
  // other thread of the agent must block them too, as startQuietThread's do) and sets up the
  // loop's descriptors. Call from the agent's main thread, which must then make every later
  // call (the workers' PR_SET_PDEATHSIG follows this thread). An error: nothing was changed
  // but possibly the signal mask.
  static Expected<std::unique_ptr<Supervisor>> create(const LaunchPlan& plan,
                                                      SupervisorParts parts);
  ~Supervisor();  // restores the signal mask
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs attempt `attempt` (the round's number; TORCHELASTIC_RESTART_COUNT is the placement's)
  // of the workers the plan and `placement` describe, to its end. `link`: a multi-machine round's
  // link to the other machines (a failure here is published through it, one there stops the workers
  // here; it must outlive the call), nullptr on one machine. Blocking; returns when every worker
  // has ended and no descendant is left.
  AttemptReport runAttempt(int attempt, const Placement& placement, RoundLink* link);

  // The one loop of every job, one machine or many: runs the attempt of the round `group` formed
  // last (`placement`: this machine's in it); after a failure, `group`'s decision (one rule,
  // round_end.h) is said — its only notice — and a restart meets the group again for the next
  // round. Blocking; returns the job's report (exit_code of the last attempt, the restarts used
  // as the last round counted them) once the job succeeded or will not restart, after telling
  // the group the job ended.
  JobReport runRounds(MachineGroup& group, Placement placement);

  // True once the agent received a signal that ends the job (no restart after it).
  bool stopRequested() const { return stop_requested_; }

 private:
  class Attempt;
  friend class Attempt;
  Supervisor(const LaunchPlan& plan, SupervisorParts parts);
  Expected<void> openDescriptors();
  Expected<Placement> meetWatchingSignals(MachineGroup& group);
  int dropPendingSignals();

  const LaunchPlan& plan_;
  SupervisorParts parts_;
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  bool signals_blocked_ = false;
  bool stop_requested_ = false;
  int stop_signal_ = 0;  // a signal that ended the job between two rounds
  int interrupts_ = 0;
  Clock::time_point started_;
};

}  // namespace accel::launcher
