#include "launcher/rendezvous/etcd_lease.h"

#include <algorithm>

#include "accel/error.h"
#include "launcher/base/quiet_thread.h"
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
EtcdLease::EtcdLease(EtcdOptions options, std::chrono::milliseconds interval, int misses,
                     std::function<void(const std::string&)> onLost)
    : client_(bounded(options, interval)),
      interval_(interval),
      ttl_(windowOf(interval, misses)),
      on_lost_(std::move(onLost)) {
  id_ = EtcdClient(std::move(options)).grantLease(ttl_);
  renewed_ = std::chrono::steady_clock::now();
  thread_ = startQuietThread([this] { run(); });  // signals are the supervisor's
}

EtcdLease::~EtcdLease() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  try {
    client_.revokeLease(id_);
  } catch (const Error&) {
    // Gone already, or etcd is: then it expires by itself.
  }
}

std::optional<std::string> EtcdLease::lost() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

void EtcdLease::run() {
  std::unique_lock lock(mutex_);
  while (!stop_ && !lost_) {
    stop_cv_.wait_for(lock, interval_, [this] { return stop_; });
    if (stop_) return;
    lock.unlock();
    renew();
    lock.lock();
  }
}

// One renewal: etcd's answer, or no answer for the whole window.
void EtcdLease::renew() {
  std::optional<std::string> why;
  const auto now = std::chrono::steady_clock::now();
  try {
    if (client_.keepAlive(id_) > 0) {
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
  {
    std::lock_guard lock(mutex_);
    lost_ = why;
  }
  if (on_lost_) on_lost_(*why);
}

}  // namespace accel::launcher
