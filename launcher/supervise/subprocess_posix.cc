#include "launcher/supervise/subprocess_posix.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace accel::launcher {
namespace {

// A CPU set for sched_setaffinity, allocated for the largest CPU number (cpu_set_t holds 1024).
class CpuMask {
 public:
  explicit CpuMask(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    int highest = 0;
    for (int cpu : cpus) highest = std::max(highest, cpu);
    set_ = CPU_ALLOC(highest + 1);
    if (!set_) return;
    size_ = CPU_ALLOC_SIZE(highest + 1);
    CPU_ZERO_S(size_, set_);
    for (int cpu : cpus) {
      if (cpu >= 0) CPU_SET_S(cpu, size_, set_);
    }
  }
  ~CpuMask() {
    if (set_) CPU_FREE(set_);
  }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;
  const cpu_set_t* set() const { return set_; }
  size_t size() const { return size_; }

 private:
  cpu_set_t* set_ = nullptr;
  size_t size_ = 0;
};

// What a child that could not become the worker reports through the error pipe.
struct ChildFailure {
  int stage;  // kStageExec or kStagePin
  int err;    // errno
};
constexpr int kStageExec = 0;
constexpr int kStagePin = 1;

std::string cpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (int cpu : cpus) out += (out.empty() ? "" : ",") + std::to_string(cpu);
  return out;
}

}  // namespace

// ---- Workers ----------------------------------------------------------------------------

Expected<pid_t> spawnWorker(const SpawnSpec& spec) {
  // Everything the child needs is built before fork: after fork only async-signal-safe calls.
  std::vector<char*> argv = probes::cStrings(spec.argv);
  std::vector<char*> envp = probes::cStrings(spec.env);
  const CpuMask mask(spec.cpus);
  if (!spec.cpus.empty() && !mask.set())
    return makeError("cannot allocate a CPU set for " + cpuListText(spec.cpus));

  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) != 0)
    return makeError(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();

  // vfork: the child borrows the agent's memory until execve, so starting a worker does not copy
  // the agent's page tables; it only makes system calls and touches its own stack until then.
  pid_t pid = ::vfork();
  if (pid < 0) {
    int err = errno;
    ::close(errPipe[0]);
    ::close(errPipe[1]);
    return makeError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the agent died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    if (!spec.inherit_stdin) {
      int devnull =
          ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // dup2 clears O_CLOEXEC on fd 0 only
      if (devnull >= 0) ::dup2(devnull, 0);
    }
    if (spec.stdout_fd >= 0) ::dup2(spec.stdout_fd, 1);
    if (spec.stderr_fd >= 0) ::dup2(spec.stderr_fd, 2);
    // Nothing of the agent's reaches the worker: descriptors another thread (the store's) opened
    // without O_CLOEXEC, or inherited by the agent itself, close at exec (errPipe included).
    closeOnExecFrom(3);
    ChildFailure failure{kStagePin, 0};
    if (mask.set() && ::sched_setaffinity(0, mask.size(), mask.set()) != 0) {
      failure.err = errno;
    } else {
      ::execve(argv[0], argv.data(), envp.data());
      failure = {kStageExec, errno};
    }
    ssize_t ignored = ::write(errPipe[1], &failure, sizeof failure);
    (void)ignored;
    ::_exit(127);
  }
  // vfork: the child has called setsid (so its group exists for signals) by the time we run.
  ::close(errPipe[1]);
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(errPipe[0], &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  ::close(errPipe[0]);
  if (n == sizeof failure) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (failure.stage == kStagePin) {
      return makeError("cannot pin '" + spec.argv[0] + "' to CPUs " + cpuListText(spec.cpus) +
                       ": " + std::strerror(failure.err));
    }
    return makeError("cannot execute '" + spec.argv[0] + "': " + std::strerror(failure.err));
  }
  return pid;
}

std::string execInPlace(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<char*> argv = probes::cStrings(args);
  std::vector<char*> envp = probes::cStrings(env);
  ::execve(argv[0], argv.data(), envp.data());
  return std::strerror(errno);
}

void closeOnExecFrom(int first) {
  if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  // Kernels before 5.11: every possible descriptor, one call each.
  rlimit limit{};
  const long max = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                       ? static_cast<long>(limit.rlim_cur)
                       : 65536;
  for (long fd = first; fd < max; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
}

void closeAllButStdioAnd(int keep) {
  if (keep > 3) ::close_range(3, static_cast<unsigned>(keep - 1), 0);
  ::close_range(static_cast<unsigned>(keep < 3 ? 3 : keep + 1), ~0U, 0);
}

void becomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

void signalGroup(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

std::optional<Reaped> endedUnreaped(pid_t pid) {
  siginfo_t info{};
  int rc;
  do {
    rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0 || info.si_pid != pid) return std::nullopt;
  Reaped r;
  r.pid = pid;
  if (info.si_code == CLD_EXITED) {
    r.exit_code = info.si_status;
  } else {
    r.signal = info.si_status;
    r.exit_code = 128 + info.si_status;
  }
  return r;
}

void reap(pid_t pid) { probes::waitForChild(pid); }

std::vector<pid_t> childrenOfThisProcess() {
  std::vector<pid_t> out;
  // One file per thread lists its children (Linux ≥ 3.5): the main thread's, which spawns the
  // workers and, as the thread-group leader, adopts orphans as subreaper. Call from it.
  std::ifstream children("/proc/self/task/" + std::to_string(::gettid()) + "/children");
  if (children) {
    long pid;
    while (children >> pid) out.push_back(static_cast<pid_t>(pid));
    return out;
  }
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...; comm may contain spaces and parentheses, so parse after the last
    // ')'.
    auto close = line.rfind(')');
    if (close == std::string::npos || close + 4 > line.size()) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 2, "%c %ld", &state, &ppid) != 2) continue;
    if (ppid == self) out.push_back(static_cast<pid_t>(std::atol(e->d_name)));
  }
  ::closedir(proc);
  return out;
}

}  // namespace accel::launcher
