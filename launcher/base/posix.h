#pragma once
// Small POSIX helpers every part of the launcher uses.

#include <cstddef>
#include <string>

namespace accel::launcher {

// "SIGSEGV" for 11; "signal N" for unknown numbers.
std::string signalName(int sig);

// Writes all of `data` to `fd`, retrying on EINTR/EAGAIN (a non-blocking fd is waited for, up
// to 100 ms at a time); false on other errors. Blocking.
bool writeAll(int fd, const char* data, size_t size);

}  // namespace accel::launcher
