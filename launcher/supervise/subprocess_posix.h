#pragma once
// The agent's processes: spawning workers, the guard's and the reaper's system calls.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/base/posix.h"
#include "libaccel/common/expected.h"
#include "probes/run_program.h"

namespace accel::launcher {

// ---- Workers ----------------------------------------------------------------------------

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is a path (no PATH search)
  std::vector<std::string> env;   // the complete environment
  int stdout_fd = -1;  // the child's stdout/stderr (write ends; the parent keeps its copies)
  int stderr_fd = -1;
  bool inherit_stdin = false;  // the agent's stdin (for pdb in one rank); else /dev/null
  std::vector<int> cpus{};     // pin the worker to these CPUs before exec; empty: the agent's
};

// Starts a worker in its own session and process group (pgid = pid, as torchrun's
// start_new_session: reading an inherited terminal works, Ctrl-C at the terminal reaches only
// the agent), with PR_SET_PDEATHSIG(SIGKILL) so it dies with the agent, default signal
// dispositions, an empty signal mask, and no descriptor but 0, 1 and 2 (stdin from /dev/null
// unless `inherit_stdin`), pinned to `cpus` when given (sched_setaffinity before exec; a
// failure is an error naming the CPUs). Uses vfork+execve because posix_spawn cannot set
// PR_SET_PDEATHSIG in the child. An exec failure (ENOENT, EACCES, ...) is reported as an error
// naming argv[0]. PR_SET_PDEATHSIG fires when the *calling thread* ends: call it from the thread
// that outlives the workers (the agent's main thread); other threads may run meanwhile.
Expected<pid_t> spawnWorker(const SpawnSpec& spec);

// Marks every descriptor >= `first` close-on-exec. Async-signal-safe: for a child between fork
// and exec.
void closeOnExecFrom(int first);

// Closes every descriptor >= 3 except `keep`. Async-signal-safe.
void closeAllButStdioAnd(int keep);

// Replaces this process with argv[0] (a path) and `env`: a rank per scheduler task, where the
// scheduler supervises the process itself. Returns only on failure, with the reason.
std::string execInPlace(const std::vector<std::string>& argv, const std::vector<std::string>& env);

// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER).
void becomeSubreaper();

// Sends `sig` to process group `pgid`; ESRCH (already gone) is not an error.
void signalGroup(pid_t pgid, int sig);

// How a child ended: its exit code (128+N for signal N) and the signal, or 0.
struct Reaped {
  pid_t pid = 0;
  int exit_code = 0;
  int signal = 0;
};

// Whether child `pid` has ended, without reaping it (waitid WNOWAIT): while it stays a zombie,
// its pid and process-group id cannot be given to another process.
std::optional<Reaped> endedUnreaped(pid_t pid);

// Reaps child `pid`, waiting for it to end.
void reap(pid_t pid);

// The pids whose parent is this process (from /proc), e.g. orphans adopted as subreaper.
std::vector<pid_t> childrenOfThisProcess();

}  // namespace accel::launcher
