#pragma once
// Non-blocking eventfds, the way the agent's threads wake its event loop (and each other).

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace accel::launcher {

// A non-blocking, close-on-exec eventfd; -1 on failure.
inline int makeEventFd() { return ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

// Makes `fd` readable.
inline void signalEventFd(int fd) {
  const uint64_t one = 1;
  ssize_t ignored = ::write(fd, &one, sizeof one);
  (void)ignored;
}

// Reads what `fd` holds, so it is no longer readable.
inline void drainEventFd(int fd) {
  uint64_t value;
  while (::read(fd, &value, sizeof value) == sizeof value) {
  }
}

}  // namespace accel::launcher
