#pragma once
// Running helper programs (nvidia-smi, python3 -c, scontrol) and finding them in PATH.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "libaccel/common/expected.h"

namespace accel::probes {

struct CapturedRun {
  int exit_code = 0;   // 128+N when killed by signal N
  std::string output;  // stdout (stderr is discarded)
};

// Runs argv[0] (searched in PATH) with `argv`, the current environment, stdin from /dev/null,
// and collects its stdout. Blocks for at most `timeout`; on expiry the child is killed with
// everything it started (it runs in a process group of its own) and an error names the command
// and the limit. Errors also cover a program that cannot be started.
Expected<CapturedRun> runCaptured(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout);

// The full path of `program` as PATH lookup would find it, or "" when it is not found.
// A name containing '/' is returned as is if it is executable.
std::string findInPath(const std::string& program);

// The null-terminated char* array execve wants, pointing into `strings` (which must outlive it).
std::vector<char*> cStrings(const std::vector<std::string>& strings);

// Waits for child `pid` (retrying on EINTR): its exit code, 128+N when killed by signal N, -1 on
// error.
int waitForChild(pid_t pid);

}  // namespace accel::probes
