#include "launcher/base/stop_signals.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "launcher/base/event_fd.h"
#include "launcher/base/quiet_thread.h"

namespace accel::launcher {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

sigset_t stopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

}  // namespace

bool isStopSignal(int sig) {
  for (int stop : kStopSignals) {
    if (sig == stop) return true;
  }
  return false;
}

// Without a signalfd or an eventfd the signals keep their default effect (nothing is blocked).
StopSignalWatch::StopSignalWatch(std::function<void()> onSignal) : on_signal_(std::move(onSignal)) {
  const sigset_t set = stopSignals();
  ::pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  stop_fd_ = makeEventFd();
  if (signal_fd_ < 0 || stop_fd_ < 0) {
    if (signal_fd_ >= 0) ::close(signal_fd_);
    if (stop_fd_ >= 0) ::close(stop_fd_);
    signal_fd_ = stop_fd_ = -1;
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    return;
  }
  thread_ = startQuietThread([this] { watch(); });
}

StopSignalWatch::~StopSignalWatch() { finish(); }

int StopSignalWatch::finish() {
  if (thread_.joinable()) {
    signalEventFd(stop_fd_);
    thread_.join();
    ::close(signal_fd_);
    ::close(stop_fd_);
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  return caught_.load();
}

// Until the first stop signal (kept, then on_signal_) or the destructor's word.
void StopSignalWatch::watch() {
  while (true) {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) return;
    signalfd_siginfo info;
    if (::read(signal_fd_, &info, sizeof info) == sizeof info) {
      caught_ = static_cast<int>(info.ssi_signo);
      if (on_signal_) on_signal_();
      return;
    }
  }
}

}  // namespace accel::launcher
