#pragma once
// The seam between the supervisor's rules and the world they act on (as ninja's Builder runs
// its commands through a CommandRunner): Processes starts, signals, watches and reaps workers;
// Clock (base/clock.h) tells the time and waits for the supervisor's descriptors. PosixProcesses
// (posix_processes.h) and MonotonicClock are the real ones; tests/launcher/supervise/fake_world.h
// drives the rules — culprit choice, escalation and its timings, restarts — without a process.

#include <sys/epoll.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <vector>

#include "launcher/base/clock.h"  // Clock, MonotonicClock: the supervisor's time
#include "launcher/supervise/rank_watch.h"
#include "launcher/supervise/subprocess_posix.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// Every call is made from the supervisor's thread; none blocks except reap().
class Processes {
 public:
  virtual ~Processes() = default;
  // Starts a worker as spawnWorker (subprocess_posix.h) does; an error names what failed.
  virtual Expected<pid_t> spawn(const SpawnSpec& spec) = 0;
  // Every worker of the attempt has been spawned (or one could not be): the real implementation
  // hands their pids to the guard in one message.
  virtual void spawnedAll() {}
  // Whether child `pid` has ended, without reaping it (its pid and group stay ours).
  virtual std::optional<Reaped> endedUnreaped(pid_t pid) = 0;
  // Reaps child `pid`, waiting for it to end.
  virtual void reap(pid_t pid) = 0;
  // Sends `sig` to the process group of the unreaped worker `leader`.
  virtual void signalGroup(pid_t leader, int sig) = 0;
  // Sends `sig` to the process `pid` only (not its children).
  virtual void signalProcess(pid_t pid, int sig) = 0;
  // This process's children but the guard's and those it had before it started anything (a
  // process substitution's reader that the shell made its child before exec'ing the agent: never
  // signalled, reaped when it ends): the workers and the orphans it adopted as subreaper.
  virtual std::vector<pid_t> otherChildren() = 0;
  // CPU time, memory and state of `pid`, or nullopt when it cannot be read.
  virtual std::optional<ProcSample> sample(pid_t pid) = 0;
};

}  // namespace accel::launcher
