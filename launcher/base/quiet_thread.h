#pragma once
// Threads of the agent never take its signals: they all arrive through the supervisor's signalfd,
// which sees a signal only when every thread blocks it.

#include <signal.h>

#include <thread>
#include <utility>

namespace accel::launcher {

// Starts `fn` on a new thread with every signal blocked from its first instruction.
template <typename Fn>
std::thread startQuietThread(Fn&& fn) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread thread(std::forward<Fn>(fn));
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return thread;
}

}  // namespace accel::launcher
