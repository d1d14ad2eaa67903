#include "launcher/base/clock.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace accel::launcher {

int MonotonicClock::wait(int epollFd, epoll_event* events, int maxEvents, time_point deadline) {
  if (deadline == time_point::max()) return ::epoll_wait(epollFd, events, maxEvents, -1);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now()).count();
  // +1: epoll_wait rounds down; waking a millisecond late never wakes before the deadline.
  const int64_t ms = std::clamp<int64_t>(left, 0, std::numeric_limits<int>::max() - 1) + 1;
  return ::epoll_wait(epollFd, events, maxEvents, static_cast<int>(ms));
}

}  // namespace accel::launcher
