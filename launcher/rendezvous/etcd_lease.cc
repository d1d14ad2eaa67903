#include "launcher/rendezvous/etcd_lease.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "accel/error.h"
#include "launcher/base/event_fd.h"
#include "launcher/base/text.h"

namespace accel::launcher {
namespace {

std::chrono::seconds windowOf(std::chrono::milliseconds interval, int misses) {
  const auto ms = interval.count() * std::max(misses, 1);
  return std::chrono::seconds(std::max<int64_t>(1, (ms + 999) / 1000));
}

// The least a renewal may take, whatever the interval: a round trip to etcd under load.
constexpr std::chrono::milliseconds kLeastRenewalBound{200};

// How much longer than the window etcd may go unanswered before this agent calls its lease lost:
// while etcd elects a leader (1-3 s after the leader's member dies) no lease expires, and the new
// leader extends them all by their TTL, so silence for the window alone does not mean the others
// dropped this machine. (etcd saying the lease ended is believed at once.)
constexpr std::chrono::seconds kElectionAllowance{5};

// Every call of the lease's thread ends within one interval: a renewal that cannot land in it
// is tried afresh at the next tick (on the next endpoint when this one is gone).
EtcdOptions bounded(EtcdOptions o, std::chrono::milliseconds interval) {
  o.timeout = std::min(o.timeout, std::max(interval, kLeastRenewalBound));
  o.attempt_timeout = std::min(o.attempt_timeout, o.timeout);
  return o;
}

}  // namespace

// The grant waits as long as any call of the agent's; the renewals, one interval each.
EtcdLease::EtcdLease(const EtcdAccess& access, EtcdOptions options,
                     std::chrono::milliseconds interval, int misses,
                     std::function<void(const std::string&)> onLost)
    : clock_(access.clock),
      client_(access.connect(bounded(options, interval))),
      interval_(interval),
      ttl_(windowOf(interval, misses)),
      on_lost_(std::move(onLost)) {
  id_ = access.connect(options)->grantLease(ttl_);
  renewed_ = clock_->now();
  stop_fd_ = makeEventFd();
  if (stop_fd_ < 0) throw Error("etcd lease: no eventfd for its thread");
  thread_ = clock_->startThread([this] { run(); });  // signals are the supervisor's
}

EtcdLease::~EtcdLease() {
  signalEventFd(stop_fd_);
  thread_.join();
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

// A renewal every interval (after the last one ended) until stopped or the lease is lost.
void EtcdLease::run() {
  while (true) {
    const int woken = waitReadable(*clock_, {stop_fd_}, clock_->now() + interval_);
    if (woken > 0) return;  // stopped
    if (woken < 0) {
      return markLost(std::string("the keep-alive thread cannot wait (epoll_create1: ") +
                      std::strerror(errno) + "): no renewal can be timed");
    }
    renew();
    std::lock_guard lock(mutex_);
    if (lost_) return;
  }
}

// One renewal: etcd's answer, or no answer for the whole window.
void EtcdLease::renew() {
  std::optional<std::string> why;
  const auto now = clock_->now();
  try {
    if (client_->keepAlive(id_) > 0) {
      renewed_ = now;
      return;
    }
    why = "etcd ended this agent's lease: no keep-alive reached it for " +
          std::to_string(ttl_.count()) + " s, so the other machines dropped this one";
  } catch (const Error& e) {
    if (now - renewed_ < ttl_ + kElectionAllowance) return;  // the next tick tries again
    why = "etcd was not reached for " + std::to_string((ttl_ + kElectionAllowance).count()) +
          " s (the keep-alive window, " + std::to_string(ttl_.count()) + " s, and " +
          std::to_string(kElectionAllowance.count()) +
          " s for etcd to elect a leader): " + e.what();
  }
  markLost(*why);
}

void EtcdLease::markLost(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    lost_ = why;
  }
  if (on_lost_) on_lost_(why);
}

}  // namespace accel::launcher
