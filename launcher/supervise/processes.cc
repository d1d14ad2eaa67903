#include "launcher/supervise/processes.h"

#include <algorithm>
#include <cstdint>

namespace accel::launcher {

int MonotonicClock::wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now()).count();
  // +1: epoll_wait rounds down; waking a millisecond late never wakes before the deadline.
  return ::epoll_wait(epollFd, events, maxEvents, static_cast<int>(std::max<int64_t>(left, 0)) + 1);
}

}  // namespace accel::launcher
