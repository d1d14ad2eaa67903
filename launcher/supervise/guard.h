#pragma once
// The guard: a small forked helper that outlives a SIGKILLed agent just long enough to kill the
// workers' process groups (PR_SET_PDEATHSIG kills the workers themselves, not their children),
// to remove the shared-memory segments whose creators are dead once the killed leaders died (at
// most 5 s: libaccel's segments of a job killed before its ranks all attached) and to remove
// the agent's temporary run directory.
//
// It signals a group only while the group's leader is known to be ours: it holds a pidfd of each
// leader, opened while the agent lived (and so had not reaped it: the agent keeps its workers
// unreaped until the end of an attempt), and kills the group only if that pidfd still refers to
// an unreaped process (pidfd_send_signal with signal 0 succeeds). A group whose leader was
// already reaped by someone else is left alone: its id may belong to a stranger by then. The
// guard keeps no descriptor of the agent's but its command pipe (and 0, 1, 2).
//
// Thread-safety: one thread (the agent's main thread) calls start, add, remove and finish.

#include <sys/types.h>

#include <string>

#include "libaccel/common/expected.h"

namespace accel::launcher {

class Guard {
 public:
  Guard() = default;
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  // Forks the guard. When `runDirToRemove` is not empty, the guard deletes it after killing the
  // groups if the agent dies. Safe to call while other threads run (the child only makes
  // async-signal-safe calls).
  Expected<void> start(const std::string& runDirToRemove);
  // The group of `leader` (a worker the agent has not reaped) is to be killed if the agent dies,
  // from the next flush() on: the workers of an attempt are handed over in one message, so the
  // guard wakes once, not once per worker. (Until then PR_SET_PDEATHSIG still kills the leader
  // itself if the agent dies.)
  void add(pid_t leader);
  // Sends what add() queued.
  void flush();
  // `leader` is about to be reaped: its group must never be signalled by the guard again.
  void remove(pid_t leader);
  // The job ended cleanly: the guard exits without killing anything (not waited for).
  void finish();
  pid_t pid() const { return pid_; }

 private:
  void tell(const std::string& line);
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string pending_;  // lines add() queued for the next flush
};

}  // namespace accel::launcher
