#pragma once
// Running helper programs: the one place in the launcher that spawns and waits.

#include <sys/types.h>

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

// ---- Workers ----------------------------------------------------------------------------


struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is a path (no PATH search)
  std::vector<std::string> env;   // the complete environment
  int stdout_fd = -1;             // the child's stdout/stderr (write ends; the parent keeps its copies)
  int stderr_fd = -1;
};

// Starts a worker in its own process group (pgid = pid), with PR_SET_PDEATHSIG(SIGKILL) so it
// dies with the agent, default signal dispositions and an empty signal mask, stdin from
// /dev/null. Uses vfork+execve because posix_spawn cannot set PR_SET_PDEATHSIG in the child.
// An exec failure (ENOENT, EACCES, ...) is reported as an error naming argv[0]. Must be called
// from a single-threaded process (PR_SET_PDEATHSIG tracks the calling thread).
Expected<pid_t> spawnWorker(const SpawnSpec& spec);

// Replaces this process with argv[0] (a path) and `env`: a rank per scheduler task, where the
// scheduler supervises the process itself. Returns only on failure, with the reason.
std::string execInPlace(const std::vector<std::string>& argv, const std::vector<std::string>& env);

// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER).
void becomeSubreaper();

// Sends `sig` to process group `pgid`; ESRCH (already gone) is not an error.
void signalGroup(pid_t pgid, int sig);

// Reaps one exited child without blocking: {pid, exit code (128+N for signal N), signal or 0};
// pid 0 when none is ready, -1 when there are no children.
struct Reaped {
  pid_t pid = 0;
  int exit_code = 0;
  int signal = 0;
};
Reaped reapOne();

// The pids whose parent is this process (from /proc), e.g. orphans adopted as subreaper.
std::vector<pid_t> childrenOfThisProcess();

// "SIGSEGV" for 11; "signal N" for unknown numbers.
std::string signalName(int sig);

// Writes all of `data` to `fd`, retrying on EINTR/EAGAIN; false on other errors.
bool writeAll(int fd, const char* data, size_t size);

}  // namespace accel::launcher
