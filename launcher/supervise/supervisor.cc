#include "launcher/supervise/supervisor.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "launcher/base/stop_signals.h"
#include "launcher/base/text.h"
#include "launcher/supervise/attempt.h"

namespace accel::launcher {
namespace {

constexpr int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

sigset_t handledSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kHandledSignals) sigaddset(&set, sig);
  return set;
}

// The decision to go on, without the cause again where this agent said it on stopping its
// workers ("a machine is waiting to join (...): the group re-forms to take it; stopping the
// workers here"): then only what the decision adds ("the group re-forms (not counted as a
// restart)").
std::string restartNotice(const AttemptReport& last, const RoundDecision& next) {
  if (last.regrouped_said && next.why.rfind(*last.regrouped, 0) == 0)
    return "the group re-forms" + next.why.substr(last.regrouped->size());
  return next.why;
}

}  // namespace

// ---- Supervisor ---------------------------------------------------------------------------

Supervisor::Supervisor(const LaunchPlan& plan, SupervisorParts parts)
    : plan_(plan), parts_(std::move(parts)), started_(parts_.clock.now()) {}

Expected<std::unique_ptr<Supervisor>> Supervisor::create(const LaunchPlan& plan,
                                                         SupervisorParts parts) {
  std::unique_ptr<Supervisor> s(new Supervisor(plan, std::move(parts)));
  if (auto ok = s->openDescriptors(); !ok) return std::move(ok).takeError();
  return s;
}

Expected<void> Supervisor::openDescriptors() {
  sigset_t set = handledSet();
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    return makeError(std::string("sigprocmask: ") + std::strerror(errno));
  }
  signals_blocked_ = true;
  ::signal(SIGPIPE, SIG_IGN);  // a closed console must not kill the agent (children get SIG_DFL)
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) return makeError(std::string("signalfd: ") + std::strerror(errno));
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return makeError(std::string("epoll_create1: ") + std::strerror(errno));
  watchFd(epoll_fd_, signal_fd_, kSignalsId, EPOLLIN);
  watchFd(epoll_fd_, parts_.console.readyFd(), kConsoleId, EPOLLIN);
  if (parts_.status) watchFd(epoll_fd_, parts_.status->fd(), kStatusId, EPOLLIN);
  return {};
}

Supervisor::~Supervisor() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (signals_blocked_) {
    sigset_t set = handledSet();
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
}

AttemptReport Supervisor::runAttempt(int attempt, const Placement& placement, RoundLink* link) {
  if (link) watchFd(epoll_fd_, link->fd(), kLinkId, EPOLLIN);
  AttemptReport report = Attempt(*this, attempt, placement, link).run();
  if (link) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, link->fd(), nullptr);
  return report;
}

// The next round's meeting under a StopSignalWatch: a signal that ends the job (Ctrl-C, SIGTERM,
// SIGHUP, SIGQUIT) interrupts the meeting at once — no worker runs to forward it to — and is kept
// in stop_signal_. What else came meanwhile had nobody to reach and is dropped
// (dropPendingSignals).
Expected<Placement> Supervisor::meetWatchingSignals(MachineGroup& group) {
  StopSignalWatch watch([&group] { group.interrupt(); });
  auto placed = group.meet();
  int caught = watch.finish();
  if (const int late = dropPendingSignals(); !caught) caught = late;
  if (caught) {
    stop_requested_ = true;
    stop_signal_ = caught;
  }
  return placed;
}

// Empties the signalfd: SIGUSR1/SIGUSR2 sent while no worker ran must not reach the next round's
// workers, a stray SIGCHLD has nothing to reap. Returns the first signal there that ends the job
// (one that came after the watch ended), else 0.
int Supervisor::dropPendingSignals() {
  int stop = 0;
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == sizeof info) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (!stop && isStopSignal(sig)) stop = sig;
  }
  return stop;
}

JobReport Supervisor::runRounds(MachineGroup& group, Placement placement) {
  JobReport report;
  while (true) {
    report.attempts.push_back(runAttempt(group.round(), placement, group.link()));
    report.restarts_used = placement.restart_count.value_or(0);
    AttemptReport& last = report.attempts.back();
    if (last.succeeded()) break;
    // A straggler's machine excluded from the job leaves it as a machine told to stop does: the
    // others re-form without it (uncounted), and nothing here failed.
    const bool excluded = last.excluded_machine >= 0 &&
                          last.excluded_machine == placement.machine_rank && !stop_requested_;
    const RoundDecision next = group.endRound(last, stop_requested_ || excluded);
    if (excluded) {
      parts_.console.notice("this machine leaves the job: " + last.regrouped.value_or("excluded"));
      report.exit_code = 0;
      return report;
    }
    if (!next.restart) {
      if (!next.why.empty()) parts_.console.notice("not restarting: " + next.why);
      break;
    }
    parts_.console.notice(restartNotice(last, next));
    auto placed = meetWatchingSignals(group);
    if (stop_signal_) {
      parts_.console.notice("stopped by " + signalName(stop_signal_) +
                            " while the machines met for the next round");
      break;
    }
    if (!placed) {
      parts_.console.notice("the job cannot go on: " + placed.error());
      break;
    }
    placement = *placed;
  }
  report.exit_code = stop_signal_ ? 128 + stop_signal_ : jobExitCode(report.attempts.back());
  group.closeJob(report.exit_code == 0
                     ? "the job finished"
                     : "the job ended with exit code " + std::to_string(report.exit_code));
  return report;
}

}  // namespace accel::launcher
