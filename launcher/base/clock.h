#pragma once
// Clock: the time, waiting for descriptors until a deadline, and the threads whose waits those are,
// behind one seam. The supervisor, the rendezvous's link (rendezvous/job_link.h) and the rounds'
// rules (GroupSettings::clock) take one, so that they run in fake time in the tests
// (tests/launcher/supervise/fake_world.h, tests/launcher/rendezvous/job_link_test.cc and
// sim_world.h); MonotonicClock is the real one.

#include <sys/epoll.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "launcher/base/quiet_thread.h"

namespace accel::launcher {

// Thread-safety: now() may be called from any thread; wait() from one thread at a time.
class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual time_point now() const = 0;
  // Waits for events on `epollFd` as epoll_wait does, until `deadline` at most (time_point::max():
  // no deadline): the number of events (0 once the deadline passed), or -1 with errno.
  virtual int wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) = 0;
  // Returns at `deadline` (at once when it passed): a pause between two looks at something.
  virtual void sleepUntil(time_point deadline) = 0;
  // Starts `body` on a thread of its own (signals blocked: startQuietThread) whose waits and
  // pauses are this clock's. A simulated clock counts it among the threads it lets finish what is
  // due before the time moves, from its start to its end.
  virtual std::thread startThread(std::function<void()> body) {
    return startQuietThread(std::move(body));
  }
  // Waits for a thread startThread() started to end, and joins it. A simulated clock counts the
  // caller as waiting meanwhile (the time may move while that thread's calls take their bounds).
  virtual void joinThread(std::thread& thread) { thread.join(); }
};

// Waits with `clock` until one of `fds` is readable (negative ones are left out) or `deadline`
// passes, through an epoll set made for the call: 1 when one is readable, 0 at the deadline, -1
// with errno when no epoll set could be made. A wait interrupted by a signal goes on.
int waitReadable(Clock& clock, const std::vector<int>& fds, Clock::time_point deadline);

// The real clock: std::chrono::steady_clock and epoll_wait.
class MonotonicClock : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  int wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) override;
  void sleepUntil(time_point deadline) override { std::this_thread::sleep_until(deadline); }
};

}  // namespace accel::launcher
