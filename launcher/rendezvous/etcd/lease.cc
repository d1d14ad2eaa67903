#include "launcher/rendezvous/etcd/lease.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "accel/error.h"
#include "launcher/base/event_fd.h"
#include "launcher/base/text.h"

namespace accel::launcher {
namespace {

std::chrono::seconds windowOf(std::chrono::milliseconds interval, int misses) {
  const auto ms = interval.count() * std::max(misses, 1);
  return std::chrono::seconds(std::max<int64_t>(1, (ms + 999) / 1000));
}

// Every call of the lease's thread ends within one interval, and each endpoint gets an equal share
// of it: a silent endpoint costs that share, and the call goes on to the next one.
EtcdOptions bounded(EtcdOptions o, const RoundTimeouts& t) {
  o.timeout = std::min(o.timeout, std::max(t.keep_alive_interval, t.etcd_renewal_least));
  const auto endpoints = static_cast<int64_t>(std::max<size_t>(o.endpoints.size(), 1));
  o.attempt_timeout =
      std::min(o.attempt_timeout, std::max(o.timeout / endpoints, t.etcd_endpoint_try_least));
  return o;
}

}  // namespace

// The grant waits as long as any call of the agent's; the renewals, one interval each.
EtcdLease::EtcdLease(const EtcdAccess& access, EtcdOptions options, const RoundTimeouts& timeouts,
                     std::function<void(const std::string&)> onLost,
                     std::function<void(const std::string&)> say)
    : clock_(access.clock),
      client_(access.connect(bounded(options, timeouts))),
      interval_(timeouts.keep_alive_interval),
      retry_(std::min(interval_, timeouts.etcd_renewal_retry)),
      ttl_(windowOf(interval_, timeouts.keep_alive_misses)),
      on_lost_(std::move(onLost)),
      say_(std::move(say)) {
  id_ = access.connect(options)->grantLease(ttl_);
  renewed_ = clock_->now();
  stop_fd_ = makeEventFd();
  if (stop_fd_ < 0) throw Error("etcd lease: no eventfd for its thread");
  thread_ = clock_->startThread([this] { run(); });  // signals are the supervisor's
}

EtcdLease::~EtcdLease() {
  signalEventFd(stop_fd_);
  clock_->joinThread(thread_);
  ::close(stop_fd_);
  try {
    client_->revokeLease(id_);
  } catch (const Error&) {
    // Gone already, or etcd is: then it expires by itself.
  }
}

std::optional<std::string> EtcdLease::lost() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

bool EtcdLease::outOfReach() const {
  std::lock_guard lock(mutex_);
  return out_of_reach_;
}

// A renewal every interval (after the last one ended; retry_ after one that failed) until
// stopped or the lease is lost.
void EtcdLease::run() {
  bool renewed = true;
  while (true) {
    const auto pause = renewed ? interval_ : retry_;
    const int woken = waitReadable(*clock_, {stop_fd_}, clock_->now() + pause);
    if (woken > 0) return;  // stopped
    if (woken < 0) {
      return markLost(std::string("the keep-alive thread cannot wait (epoll_create1: ") +
                      std::strerror(errno) + "): no renewal can be timed");
    }
    renewed = renew();
    std::lock_guard lock(mutex_);
    if (lost_) return;
  }
}

// One renewal: whether etcd took it. etcd saying the lease is gone loses it; etcd not answering
// loses nothing, and is said once the window passed without a renewal.
bool EtcdLease::renew() {
  const auto now = clock_->now();
  try {
    if (client_->keepAlive(id_) <= 0) {
      markLost(endedText(now));
      return false;
    }
  } catch (const Error& e) {
    if (now - renewed_ < ttl_) return false;
    bool said;
    {
      std::lock_guard lock(mutex_);
      said = std::exchange(out_of_reach_, true);
    }
    if (!said && say_) {
      say_("etcd is out of reach (no keep-alive landed for " + std::to_string(ttl_.count()) +
           " s: " + e.what() +
           "); the workers go on, and this agent keeps trying: while etcd has no leader no "
           "lease ends");
    }
    return false;
  }
  bool wasOut;
  {
    std::lock_guard lock(mutex_);
    wasOut = std::exchange(out_of_reach_, false);
  }
  if (wasOut && say_) {
    say_("etcd answers again after " +
         secondsText(std::chrono::duration_cast<std::chrono::milliseconds>(now - renewed_)) +
         "; this agent's lease lived on");
  }
  renewed_ = now;
  std::lock_guard lock(mutex_);
  answered_by_ = client_->endpointInUse();
  answered_at_ = clock_->now();
  return true;
}

std::optional<Clock::time_point> EtcdLease::answeredBy(const std::string& endpoint) const {
  std::lock_guard lock(mutex_);
  if (answered_by_ != endpoint || answered_by_.empty()) return std::nullopt;
  return answered_at_;
}

// Why the lease is gone, as far as this agent can tell: expired (the window passed since the last
// renewal etcd took), or unknown to etcd well inside its window (revoked by someone else, or
// etcd's data was lost: wiped, or restored from an older snapshot) — not a keep-alive's fault.
std::string EtcdLease::endedText(Clock::time_point now) const {
  if (now - renewed_ < ttl_) {
    return "etcd no longer knows this agent's lease, renewed " +
           secondsText(std::chrono::duration_cast<std::chrono::milliseconds>(now - renewed_)) +
           " ago (revoked, or etcd's data was lost: wiped, or restored from an older snapshot), "
           "so this machine is no longer in the job";
  }
  return "etcd ended this agent's lease: no keep-alive reached it for " +
         std::to_string(ttl_.count()) + " s, so the other machines dropped this one";
}

void EtcdLease::markLost(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    lost_ = why;
  }
  if (on_lost_) on_lost_(why);
}

}  // namespace accel::launcher
