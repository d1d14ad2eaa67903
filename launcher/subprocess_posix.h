#pragma once
// Running helper programs: the one place in the launcher that spawns and waits.

#include <chrono>
#include <string>
#include <vector>

#include "libaccel/common/expected.h"

namespace accel::launcher {

struct CapturedRun {
  int exit_code = 0;   // 128+N when killed by signal N
  std::string output;  // stdout (stderr is discarded)
};

// Runs argv[0] (searched in PATH) with `argv`, the current environment, stdin from /dev/null,
// and collects its stdout. Blocks for at most `timeout`; on expiry the child is killed and an
// error names the command and the limit. Errors also cover a program that cannot be started.
Expected<CapturedRun> runCaptured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// The full path of `program` as PATH lookup would find it, or "" when it is not found.
// A name containing '/' is returned as is if it is executable.
std::string findInPath(const std::string& program);

}  // namespace accel::launcher
