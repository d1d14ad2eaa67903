#pragma once
// StopSignalWatch: while it lives, the signals that end a job — SIGINT (Ctrl-C), SIGTERM, SIGHUP,
// SIGQUIT — are blocked in the calling thread and waited for on a thread of their own, which calls
// `onSignal` at the first (from that thread) and keeps it. For a wait that no supervisor watches
// yet (round 0's meeting): the wait is interrupted at once and the agent says why it stops,
// instead of dying on the signal's default action with what it holds (an etcd registration)
// left behind. Every other thread of the agent blocks these signals already (startQuietThread),
// so the process-directed signal reaches the watch.
//
// Construct, finish() and destroy on one thread. finish() (or the destructor) ends the watch's
// thread and restores the calling thread's signal mask: a signal caught is consumed and told by
// finish(); one that comes after it has the effect the restored mask gives it.

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace accel::launcher {

// Whether `sig` is one of the signals that end a job (the ones a StopSignalWatch waits for).
bool isStopSignal(int sig);

class StopSignalWatch {
 public:
  explicit StopSignalWatch(std::function<void()> onSignal);
  ~StopSignalWatch();
  StopSignalWatch(const StopSignalWatch&) = delete;
  StopSignalWatch& operator=(const StopSignalWatch&) = delete;

  // Ends the watch; returns the signal it caught (0: none). Idempotent. Read only after the
  // thread ended, so a signal caught while the watched wait returned is never lost.
  int finish();

 private:
  void watch();

  const std::function<void()> on_signal_;
  sigset_t old_mask_;
  int signal_fd_ = -1;
  int stop_fd_ = -1;
  std::atomic<int> caught_{0};
  std::thread thread_;
};

}  // namespace accel::launcher
