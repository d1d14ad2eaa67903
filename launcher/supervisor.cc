#include "launcher/supervisor.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>

#include "config/paths.h"
#include "launcher/oom.h"
#include "launcher/output_prefixer.h"
#include "launcher/subprocess_posix.h"
#include "launcher/worker_env.h"

namespace accel::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTailLines = 20;
constexpr int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

sigset_t handledSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kHandledSignals) sigaddset(&set, sig);
  return set;
}

// The last lines of a stream, for the failure summary. A '\r'-redrawn line keeps its last state.
class TailBuffer {
 public:
  void feed(const char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      char c = data[i];
      if (c == '\n') {
        push();
      } else if (c == '\r') {
        partial_.clear();
      } else if (partial_.size() < 4096) {
        partial_ += c;
      }
    }
  }
  std::vector<std::string> lines() {
    if (!partial_.empty()) push();
    return {lines_.begin(), lines_.end()};
  }

 private:
  void push() {
    lines_.push_back(partial_);
    partial_.clear();
    if (lines_.size() > kTailLines) lines_.pop_front();
  }
  std::deque<std::string> lines_;
  std::string partial_;
};

// torch's @record writes {"message": {"message": "...", "extraInfo": {...}}}; keep the message.
std::string readErrorFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_discarded() && j.contains("message")) {
    const auto& m = j["message"];
    if (m.is_object() && m.contains("message") && m["message"].is_string()) return m["message"].get<std::string>();
    if (m.is_string()) return m.get<std::string>();
  }
  std::string raw = text.str();
  return raw.substr(0, 300);
}

// The guard: a forked helper that outlives a SIGKILLed agent just long enough to kill the
// workers' process groups (PR_SET_PDEATHSIG covers the workers, not their children). It reads
// "+PGID", "-PGID" and "done" lines; end of input without "done" means the agent died. Then,
// when `removeArgv` is given (the agent's temporary run directory), it becomes `rm -rf DIR`.
[[noreturn]] void runGuard(int readFd, char* const* removeArgv) {
  // Only async-signal-safe calls and no allocation: the agent may have other threads (the
  // store's) when it forks this process.
  ::setpgid(0, 0);  // out of the terminal's foreground group: Ctrl-C is the agent's business
  constexpr int kMaxGroups = 8192;
  static pid_t groups[kMaxGroups];
  int count = 0;
  char line[32];
  size_t length = 0;
  char c;
  while (true) {
    ssize_t n = ::read(readFd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (c != '\n') {
      if (length < sizeof line - 1) line[length++] = c;
      continue;
    }
    line[length] = '\0';
    length = 0;
    if (std::strcmp(line, "done") == 0) ::_exit(0);
    pid_t g = 0;
    for (const char* p = line + 1; *p >= '0' && *p <= '9'; ++p) g = g * 10 + (*p - '0');
    if (line[0] == '+' && count < kMaxGroups) groups[count++] = g;
    if (line[0] == '-') {
      for (int i = 0; i < count; ++i) {
        if (groups[i] == g) groups[i] = 0;
      }
    }
  }
  for (int i = 0; i < count; ++i) {
    if (groups[i] > 0) ::kill(-groups[i], SIGKILL);
  }
  if (removeArgv) ::execv("/bin/rm", removeArgv);
  ::_exit(0);
}

}  // namespace

struct Supervisor::Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int fds[2] = {-1, -1};       // read ends: stdout, stderr
  int log_fds[2] = {-1, -1};   // log files, when logging
  OutputPrefixer prefixers[2] = {OutputPrefixer(""), OutputPrefixer("")};
  TailBuffer stderr_tail;
  std::string error_file;
  WorkerOutcome outcome;
  bool show_on_console = true;

  // What the failure report shows of its stderr: a spawn error if it never started, else the
  // last lines it wrote.
  std::vector<std::string> stderrTail() {
    return outcome.stderr_tail.empty() ? stderr_tail.lines() : outcome.stderr_tail;
  }
};

Supervisor::Supervisor(const LaunchPlan& plan, Environment parentEnv, std::string runDir)
    : plan_(plan), parent_env_(std::move(parentEnv)), run_dir_(std::move(runDir)) {}

Supervisor::~Supervisor() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (guard_fd_ >= 0) ::close(guard_fd_);
}

Expected<void> Supervisor::start() {
  sigset_t set = handledSet();
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return makeError(std::string("sigprocmask: ") + std::strerror(errno));
  ::signal(SIGPIPE, SIG_IGN);  // a closed console must not kill the agent (children get SIG_DFL back)
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) return makeError(std::string("signalfd: ") + std::strerror(errno));
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return makeError(std::string("epoll_create1: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = ~0ull;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev) != 0) {
    return makeError(std::string("epoll_ctl: ") + std::strerror(errno));
  }
  becomeSubreaper();

  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) return makeError(std::string("pipe: ") + std::strerror(errno));
  // Built before fork: the guard may not allocate.
  std::string rmName = "rm", rmFlags = "-rf", rmDir = run_dir_;
  char* removeArgv[] = {rmName.data(), rmFlags.data(), rmDir.data(), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) return makeError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(pipeFds[1]);
    runGuard(pipeFds[0], remove_run_dir_ ? removeArgv : nullptr);
  }
  ::close(pipeFds[0]);
  guard_pid_ = pid;
  guard_fd_ = pipeFds[1];
  return {};
}

void Supervisor::tellGuard(const std::string& line) {
  if (guard_fd_ >= 0) writeAll(guard_fd_, (line + "\n").data(), line.size() + 1);
}

void Supervisor::finish() {
  tellGuard("done");
  if (guard_fd_ >= 0) ::close(guard_fd_);
  guard_fd_ = -1;
  if (guard_pid_ > 0) {
    int status;
    while (::waitpid(guard_pid_, &status, 0) < 0 && errno == EINTR) {
    }
    guard_pid_ = -1;
  }
  sigset_t set = handledSet();
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

void Supervisor::signalRunning(std::vector<Worker>& workers, int sig, bool collateral) {
  for (auto& w : workers) {
    if (!w.running) continue;
    if (collateral) w.outcome.stopped_by_agent = true;
    signalGroup(w.pid, sig);
  }
}

void Supervisor::onWorkerExit(AttemptReport& report, std::vector<Worker>& workers, size_t index, int exitCode,
                              int signal) {
  Worker& w = workers[index];
  w.running = false;
  w.outcome.exit_code = exitCode;
  w.outcome.signal = signal;
  w.outcome.ended_after_s = std::chrono::duration<double>(Clock::now() - attempt_start_).count();
  if (exitCode == 0) return;
  if (!w.error_file.empty()) w.outcome.error_file_message = readErrorFile(w.error_file);
  if (report.culprit || w.outcome.stopped_by_agent || report.agent_signal != 0) return;
  report.culprit = index;
  culprit_end_ = Clock::now();
  signalRunning(workers, SIGTERM, /*collateral=*/true);
  stopping_ = true;
  kill_deadline_ = Clock::now() + plan_.term_timeout;
}

void Supervisor::handleSignals(AttemptReport& report, std::vector<Worker>& workers) {
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == sizeof info) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below, whatever the number of SIGCHLDs merged
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      signalRunning(workers, sig, false);
      continue;
    }
    report.agent_signal = sig;
    stop_requested_ = true;
    int forward = sig;
    if (sig == SIGINT) {
      ++interrupts_;
      forward = interrupts_ == 1 ? SIGINT : interrupts_ == 2 ? SIGTERM : SIGKILL;
      if (!plan_.quiet) {
        std::string note = interrupts_ == 1 ? "accel: SIGINT forwarded to the workers (again: SIGTERM, a third time: SIGKILL)\n"
                           : interrupts_ == 2 ? "accel: second SIGINT: sending SIGTERM to the workers\n"
                                              : "accel: third SIGINT: sending SIGKILL to the workers\n";
        writeAll(2, note.data(), note.size());
      }
    } else if (!stopping_) {
      stopping_ = true;
      kill_deadline_ = Clock::now() + plan_.term_timeout;
    }
    signalRunning(workers, forward, false);
  }
  // Reap everything that ended: workers, and orphans we adopted as subreaper.
  while (true) {
    Reaped r = reapOne();
    if (r.pid <= 0) break;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (workers[i].pid == r.pid && workers[i].running) onWorkerExit(report, workers, i, r.exit_code, r.signal);
    }
  }
}

void Supervisor::onRemoteFailure(AttemptReport& report, std::vector<Worker>& workers) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, events_.fd, nullptr);
  watching_ = false;
  std::optional<JobFailure> failure = events_.read();
  if (!failure || report.remote_culprit || report.told_others) return;
  // Stopped by a signal here too (scancel signals every node): this agent's own story stands.
  if (report.agent_signal != 0 && failure->rank < 0) return;
  report.remote_culprit = std::move(failure);
  if (stopping_) return;  // already stopping for a reason of its own
  if (!plan_.quiet) {
    std::string note = "accel: " + describeFailure(*report.remote_culprit) + "; stopping the workers here\n";
    writeAll(2, note.data(), note.size());
  }
  culprit_end_ = Clock::now();
  signalRunning(workers, SIGTERM, /*collateral=*/true);
  stopping_ = true;
  kill_deadline_ = Clock::now() + plan_.term_timeout;
}

void Supervisor::killLeftovers(std::vector<Worker>& workers) {
  // Whatever is left in a worker's process group (a forked sleeper, a data-loader process)...
  for (auto& w : workers) signalGroup(w.pid, SIGKILL);
  // ...and orphans re-parented to us that left those groups.
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> children;
    for (pid_t pid : childrenOfThisProcess()) {
      if (pid != guard_pid_) children.push_back(pid);
    }
    if (children.empty()) break;
    for (pid_t pid : children) {
      ::kill(pid, SIGKILL);
      int status;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  for (auto& w : workers) tellGuard("-" + std::to_string(w.pid));
}

AttemptReport Supervisor::runAttempt(int attempt) {
  AttemptReport report;
  report.attempt = attempt;
  stopping_ = false;
  culprit_end_.reset();
  attempt_start_ = Clock::now();
  const auto oomBefore = readOomKillCount();
  const std::string attemptDir = run_dir_ + "/attempt_" + std::to_string(attempt);

  std::vector<Worker> workers(static_cast<size_t>(plan_.local_world_size));
  for (int lr = 0; lr < plan_.local_world_size; ++lr) {
    Worker& w = workers[static_cast<size_t>(lr)];
    w.local_rank = lr;
    w.rank = globalRank(plan_, lr);
    w.outcome.rank = w.rank;
    w.outcome.local_rank = lr;
    std::string prefix = "[rank " + std::to_string(w.rank) + "] ";
    w.prefixers[0] = OutputPrefixer(prefix);
    w.prefixers[1] = OutputPrefixer(prefix);
    w.show_on_console = !plan_.console_ranks || plan_.console_ranks->count(lr);
    const std::string rankDir = attemptDir + "/rank_" + std::to_string(w.rank);
    (void)config::makeDirectories(rankDir);  // a failure shows as missing logs, not a lost job
    w.error_file = rankDir + "/error.json";
    ::unlink(w.error_file.c_str());
    if (plan_.log_dir) {
      w.log_fds[0] = ::open((rankDir + "/stdout.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      w.log_fds[1] = ::open((rankDir + "/stderr.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
  }

  // Spawn all workers; a worker that cannot start counts as the culprit.
  for (auto& w : workers) {
    if (report.culprit) break;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      w.outcome.stderr_tail = {std::string("cannot create pipes: ") + std::strerror(errno)};
      onWorkerExit(report, workers, static_cast<size_t>(w.local_rank), 127, 0);
      break;
    }
    WorkerSlot slot{w.local_rank, attempt, master_port_, w.error_file};
    SpawnSpec spec{plan_.argv, workerEnvironment(plan_, slot, parent_env_), out[1], err[1]};
    auto pid = spawnWorker(spec);
    ::close(out[1]);
    ::close(err[1]);
    if (!pid) {
      ::close(out[0]);
      ::close(err[0]);
      w.outcome.stderr_tail = {pid.error()};
      std::string line = "accel: rank " + std::to_string(w.rank) + ": " + pid.error() + "\n";
      writeAll(2, line.data(), line.size());
      onWorkerExit(report, workers, static_cast<size_t>(w.local_rank), 127, 0);
      break;
    }
    w.pid = *pid;
    w.running = true;
    w.outcome.pid = *pid;
    tellGuard("+" + std::to_string(*pid));
    for (int stream = 0; stream < 2; ++stream) {
      w.fds[stream] = stream == 0 ? out[0] : err[0];
      ::fcntl(w.fds[stream], F_SETFL, O_NONBLOCK);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = (static_cast<uint64_t>(w.local_rank) << 1) | static_cast<uint64_t>(stream);
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, w.fds[stream], &ev);
    }
  }

  char buf[65536];
  auto drain = [&](Worker& w, int stream) {
    while (true) {
      ssize_t n = ::read(w.fds[stream], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;  // EAGAIN: more later
      if (n == 0) {       // EOF: the last writer (worker or descendant) closed it
        std::string rest = w.prefixers[stream].flush();
        if (!rest.empty() && w.show_on_console && (plan_.tee & (stream + 1))) writeAll(stream + 1, rest.data(), rest.size());
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fds[stream], nullptr);
        ::close(w.fds[stream]);
        w.fds[stream] = -1;
        return;
      }
      if (w.log_fds[stream] >= 0) writeAll(w.log_fds[stream], buf, static_cast<size_t>(n));
      if (stream == 1) w.stderr_tail.feed(buf, static_cast<size_t>(n));
      std::string lines = w.prefixers[stream].feed(std::string_view(buf, static_cast<size_t>(n)));
      if (!lines.empty() && w.show_on_console && (plan_.tee & (stream + 1))) {
        writeAll(stream + 1, lines.data(), lines.size());
      }
    }
  };
  auto anyRunning = [&] {
    for (auto& w : workers) {
      if (w.running) return true;
    }
    return false;
  };

  // The first failure here, published to the other machines once its stderr is read.
  bool published = false;
  auto publishFailure = [&] {
    if (published || !events_.publish || (!report.culprit && report.agent_signal == 0)) return;
    published = true;
    if (report.remote_culprit) return;  // another machine was first; the others know
    JobFailure mine;
    mine.machine_rank = events_.machine_rank;
    mine.host = events_.host;
    if (report.culprit) {
      Worker& w = workers[*report.culprit];
      if (w.fds[1] >= 0) drain(w, 1);
      mine.rank = w.rank;
      mine.local_rank = w.local_rank;
      mine.pid = w.pid;
      mine.exit_code = w.outcome.exit_code;
      mine.signal = w.outcome.signal;
      mine.ended_after_s = w.outcome.ended_after_s;
      mine.stderr_tail = w.stderrTail();
      mine.error_file_message = w.outcome.error_file_message;
    } else {
      mine.reason = "its agent received " + signalName(report.agent_signal);
      mine.exit_code = 128 + report.agent_signal;
    }
    if (auto first = events_.publish(mine)) {
      if (report.culprit || first->rank >= 0) report.remote_culprit = std::move(first);
    } else {
      report.told_others = true;
    }
  };
  if (events_.fd >= 0 && !watching_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = ~1ull;
    watching_ = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, events_.fd, &ev) == 0;
  }

  // Signals that arrived before or during spawning (e.g. Ctrl-C at start-up) are handled here.
  handleSignals(report, workers);
  publishFailure();
  epoll_event events[64];
  while (anyRunning()) {
    int timeout = -1;
    if (stopping_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_deadline_ - Clock::now()).count();
      if (left <= 0) {
        for (auto& w : workers) {
          if (w.running) {
            w.outcome.needed_sigkill = true;
            signalGroup(w.pid, SIGKILL);
          }
        }
        stopping_ = false;  // SIGKILL cannot be refused; just wait for the exits
        continue;
      }
      timeout = static_cast<int>(left) + 1;
    }
    int n = ::epoll_wait(epoll_fd_, events, 64, timeout);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == ~0ull) {
        handleSignals(report, workers);
        continue;
      }
      if (events[i].data.u64 == ~1ull) {
        if (watching_) onRemoteFailure(report, workers);
        continue;
      }
      auto& w = workers[events[i].data.u64 >> 1];
      int stream = static_cast<int>(events[i].data.u64 & 1);
      if (w.fds[stream] >= 0) drain(w, stream);
    }
    publishFailure();
  }

  publishFailure();
  if (watching_) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, events_.fd, nullptr);
    watching_ = false;
  }
  killLeftovers(workers);
  // Everything that could write to the pipes is gone: read what is left, then close.
  for (auto& w : workers) {
    for (int stream = 0; stream < 2; ++stream) {
      if (w.fds[stream] >= 0) {
        ::fcntl(w.fds[stream], F_SETFL, 0);
        drain(w, stream);
      }
      if (w.log_fds[stream] >= 0) ::close(w.log_fds[stream]);
    }
  }
  // SIGCHLDs of the leftovers were consumed by waitpid above; drop their queued signals.
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo != SIGCHLD) {
      report.agent_signal = static_cast<int>(info.ssi_signo);
      stop_requested_ = true;
    }
  }

  for (auto& w : workers) {
    w.outcome.stderr_tail = w.stderrTail();
    report.workers.push_back(w.outcome);
  }
  report.duration_s = std::chrono::duration<double>(Clock::now() - attempt_start_).count();
  if (culprit_end_) {
    double last = 0;
    for (const auto& w : report.workers) {
      if (w.stopped_by_agent) last = std::max(last, w.ended_after_s);
    }
    double culpritAt = std::chrono::duration<double>(*culprit_end_ - attempt_start_).count();
    if (last > 0) report.stop_s = std::max(0.0, last - culpritAt);
  }
  const auto oomAfter = readOomKillCount();
  report.oom_suspected = oomBefore && oomAfter && *oomAfter > *oomBefore;
  return report;
}

}  // namespace accel::launcher
