#include "launcher/supervise/guard.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

#include "launcher/supervise/subprocess_posix.h"
#include "libaccel/comm/shm_segment.h"

namespace accel::launcher {
namespace {

constexpr int kMaxGroups = 8192;
// How long the guard waits for the killed leaders to die before it sweeps their segments.
constexpr long kDeathWaitMs = 5000;

struct Group {
  pid_t leader;
  int pidfd;
};

// Parses "+PID" / "-PID" / "done" lines from the agent; returns at end of input (the agent died)
// with the groups still registered. Exits on "done".
int readCommands(int readFd, pid_t agent, Group* groups) {
  int count = 0;
  char line[32];
  size_t length = 0;
  char chunk[512];
  ssize_t n = 0, at = 0;
  while (true) {
    if (at == n) {  // read what the agent sent in one go (a batch of pids is one write)
      n = ::read(readFd, chunk, sizeof chunk);
      at = 0;
      if (n < 0 && errno == EINTR) {
        n = 0;
        continue;
      }
      if (n <= 0) return count;
    }
    const char c = chunk[at++];
    if (c != '\n') {
      if (length < sizeof line - 1) line[length++] = c;
      continue;
    }
    line[length] = '\0';
    length = 0;
    if (std::strcmp(line, "done") == 0) ::_exit(0);
    pid_t g = 0;
    for (const char* p = line + 1; *p >= '0' && *p <= '9'; ++p) g = g * 10 + (*p - '0');
    if (line[0] == '+' && count < kMaxGroups) {
      // Opened while the agent lives (checked after): the leader was not reaped, the pidfd is its.
      int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, g, 0));
      if (pidfd >= 0 && ::getppid() != agent) {
        ::close(pidfd);
        pidfd = -1;
      }
      if (pidfd >= 0) groups[count++] = Group{g, pidfd};
    } else if (line[0] == '-') {
      for (int i = 0; i < count; ++i) {
        if (groups[i].leader == g && groups[i].pidfd >= 0) {
          ::close(groups[i].pidfd);
          groups[i].pidfd = -1;
        }
      }
    }
  }
}

long monotonicMs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Until every killed leader is dead (its pidfd readable), at most kDeathWaitMs: a segment is
// stale, and swept, only once its creator is gone.
void awaitDeaths(Group* groups, int count) {
  static pollfd fds[kMaxGroups];
  const long deadline = monotonicMs() + kDeathWaitMs;
  for (;;) {
    int waiting = 0;
    for (int i = 0; i < count; ++i) {
      if (groups[i].pidfd >= 0) fds[waiting++] = pollfd{groups[i].pidfd, POLLIN, 0};
    }
    const long left = deadline - monotonicMs();
    if (waiting == 0 || left <= 0) return;
    if (::poll(fds, static_cast<nfds_t>(waiting), static_cast<int>(left)) < 0 && errno != EINTR)
      return;
    for (int i = 0, k = 0; i < count; ++i) {
      if (groups[i].pidfd < 0) continue;
      if (fds[k++].revents & (POLLIN | POLLHUP | POLLERR))
        groups[i].pidfd = -1;  // dead (left open: exiting)
    }
  }
}

// Only async-signal-safe calls and no allocation: the agent has other threads (the store's, the
// console's) when it forks this process.
[[noreturn]] void runGuard(int readFd, pid_t agent, char* const* removeArgv) {
  ::setpgid(0, 0);  // out of the terminal's foreground group: Ctrl-C is the agent's business
  closeAllButStdioAnd(readFd);
  static Group groups[kMaxGroups];
  const int count = readCommands(readFd, agent, groups);
  for (int i = 0; i < count; ++i) {
    if (groups[i].pidfd < 0) continue;
    // Signal 0 through the pidfd: succeeds only while the leader is unreaped (alive or a
    // zombie), i.e. while its id cannot have been given to another process.
    if (::syscall(SYS_pidfd_send_signal, groups[i].pidfd, 0, nullptr, 0) == 0)
      ::kill(-groups[i].leader, SIGKILL);
  }
  // The workers' shared-memory segments that were not yet unlinked (a job killed while its
  // ranks were still meeting), once their creators are dead.
  awaitDeaths(groups, count);
  shm::sweepStaleSegments();
  if (removeArgv) ::execv("/bin/rm", removeArgv);
  ::_exit(0);
}

}  // namespace

Guard::~Guard() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<void> Guard::start(const std::string& runDirToRemove) {
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0)
    return makeError(std::string("pipe: ") + std::strerror(errno));
  // Built before fork: the guard may not allocate.
  std::string rmName = "rm", rmFlags = "-rf", rmDir = runDirToRemove;
  char* removeArgv[] = {rmName.data(), rmFlags.data(), rmDir.data(), nullptr};
  const pid_t agent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return makeError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(pipeFds[1]);
    runGuard(pipeFds[0], agent, runDirToRemove.empty() ? nullptr : removeArgv);
  }
  ::close(pipeFds[0]);
  pid_ = pid;
  fd_ = pipeFds[1];
  return {};
}

void Guard::tell(const std::string& line) {
  pending_ += line + "\n";
  flush();
}

void Guard::add(pid_t leader) { pending_ += "+" + std::to_string(leader) + "\n"; }

void Guard::flush() {
  if (fd_ >= 0 && !pending_.empty()) writeAll(fd_, pending_.data(), pending_.size());
  pending_.clear();
}

void Guard::remove(pid_t leader) { tell("-" + std::to_string(leader)); }

// The guard exits by itself once it reads "done": it is not waited for (a zombie at most, until
// the agent exits).
void Guard::finish() {
  tell("done");
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace accel::launcher
