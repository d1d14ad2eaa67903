#include "launcher/base/clock.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

int waitReadable(Clock& clock, const std::vector<int>& fds, Clock::time_point deadline) {
  const int epollFd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epollFd < 0) return -1;
  for (int fd : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (fd >= 0) ::epoll_ctl(epollFd, EPOLL_CTL_ADD, fd, &ev);
  }
  epoll_event ev;
  int n;
  do {
    n = clock.wait(epollFd, &ev, 1, deadline);
  } while (n < 0 && errno == EINTR);
  ::close(epollFd);
  return n > 0 ? 1 : 0;
}

}  // namespace accel::launcher
