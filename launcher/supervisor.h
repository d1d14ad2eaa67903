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

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "launcher/console.h"
#include "launcher/guard.h"
#include "launcher/job_link.h"
#include "launcher/job_report.h"
#include "launcher/launch_plan.h"
#include "launcher/rank_watch.h"
#include "launcher/status_socket.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

class Supervisor {
 public:
  // `runDir` holds attempt_K/<local rank>/{stdout.log,stderr.log,error.json} (torchrun's layout);
  // a stream's log is written there when plan.fileStreams() names it, and it reaches the console
  // when plan.consoleStreams() does. Output and notices go through `console`.
  Supervisor(const LaunchPlan& plan, Environment parentEnv, std::string runDir, Console& console);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // `dir` (the agent's temporary one, holding the run directory) is deleted by the guard after
  // it killed the workers, if the agent is SIGKILLed. Call before start().
  void removeIfKilled(std::string dir) { remove_if_killed_ = std::move(dir); }

  // Blocks the handled signals in the calling thread (they arrive through the signalfd; other
  // threads must block them too: start them after this call, or block them before), becomes
  // subreaper, starts the guard and listens for `accel status` (status_socket.h; if it cannot,
  // says so and goes on without). Call once, before runAttempt, from the agent's main thread,
  // which must then make every later call (the workers' PR_SET_PDEATHSIG follows this thread).
  Expected<void> start();

  // The store's port, given to workers as MASTER_PORT. Call before runAttempt.
  void setMasterPort(int port) { master_port_ = port; }

  // Global rank of this machine's local rank 0 (from the rendezvous). Call before runAttempt.
  void setRankOffset(int offset) { plan_.rank_offset = offset; }

  // Links this machine to the others of a multi-machine job (not owned; must outlive every
  // runAttempt). Call after start(), before runAttempt.
  void setJobLink(JobLink* link, int machineRank, std::string host);

  // The ranks' heartbeats as the job's store sees them (machine 0's agent hosts it; not owned,
  // must outlive every runAttempt). Without one, progress is read from output and CPU time.
  void setProgressBoard(ProgressBoard* board) { board_ = board; }

  // What `accel status` tells of the job besides its ranks (run id, command, machine, store).
  void setStatusFacts(nlohmann::json facts) { status_facts_ = std::move(facts); }

  // Runs attempt `attempt` to its end. Blocking; returns when every worker has ended and no
  // descendant is left.
  AttemptReport runAttempt(int attempt);

  // True once the agent received a signal that ends the job (no restart after it).
  bool stopRequested() const { return stop_requested_; }

  // Stops answering `accel status`, tells the guard the job ended cleanly and restores the
  // signal mask.
  void finish();

 private:
  class Attempt;
  friend class Attempt;

  LaunchPlan plan_;
  Environment parent_env_;
  std::string run_dir_;
  Console& console_;
  int master_port_ = 0;
  JobLink* link_ = nullptr;
  int machine_rank_ = 0;
  std::string host_;
  bool link_watched_ = false;  // the link's descriptor is in the epoll set
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  Guard guard_;
  std::string remove_if_killed_;  // "" : nothing
  bool stop_requested_ = false;
  int interrupts_ = 0;
  ProgressBoard* board_ = nullptr;
  StatusListener status_;
  nlohmann::json status_facts_ = nlohmann::json::object();
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace accel::launcher
