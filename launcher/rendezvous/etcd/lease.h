#pragma once
// EtcdLease: an agent's lease on etcd for the whole job (issue 34), kept alive by a thread of its
// own every keep_alive_interval. Its TTL is the keep-alive window (interval x misses, in whole
// seconds, at least 1; etcd may round it up to its own minimum), and every registration of the
// agent is attached to it: an agent whose process or machine is gone stops renewing it, and
// etcd removes its registrations within the window, which every other agent's watch sees.
//
// This agent's side: etcd saying the lease ended (the others have dropped this machine; or etcd
// no longer knows it at all, its data lost) makes lost() say why: the agent must stop its
// workers, it is no longer in the job. etcd out of reach, for however long, ends nothing: while
// etcd has no leader no lease expires, and a new leader extends them all; the workers do not need
// etcd to train. The agent says once that etcd is out of reach (no renewal landed for the window)
// and once that it answers again; whether the others dropped this machine meanwhile is etcd's to
// say when it answers.
//
// Each renewal is bounded by one interval in all, and every endpoint gets a share of it: one
// that is silent (its machine cut off) costs a third of the interval of three, not the lease
// (the client goes on to the next endpoint within the call). A renewal that failed is tried
// again after etcd_renewal_retry, not a whole interval later.
//
// The constructor blocks to grant the lease (throws accel::NetworkError when etcd cannot be
// reached, naming its endpoints); the renewals' thread is started, and waits, through
// `access.clock`. Thread-safety: id(), lost() and outOfReach() from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "launcher/plan/round_timeouts.h"
#include "launcher/rendezvous/etcd/api.h"

namespace accel::launcher {

class EtcdLease {
 public:
  // `onLost` (may be empty) is called once, from the lease's thread, when lost() becomes set,
  // with why. `say` (may be empty), from the lease's thread too: etcd out of reach, and back.
  // `timeouts`: keep_alive_interval and keep_alive_misses (the window), and the etcd_renewal_*
  // bounds (round_timeouts.h).
  EtcdLease(const EtcdAccess& access, EtcdOptions options, const RoundTimeouts& timeouts,
            std::function<void(const std::string&)> onLost = {},
            std::function<void(const std::string&)> say = {});
  // Revokes the lease (best effort, bounded by one call's timeout: the job is over, the
  // agent's registrations go at once) and ends the thread.
  ~EtcdLease();
  EtcdLease(const EtcdLease&) = delete;
  EtcdLease& operator=(const EtcdLease&) = delete;

  int64_t id() const { return id_; }
  // Why this agent's lease is lost (nullopt: it is not).
  std::optional<std::string> lost() const;
  // No renewal has landed for the window: etcd is out of reach (the lease may live on).
  bool outOfReach() const;
  // When endpoint `endpoint` ("host:port") last took a renewal (nullopt: never) — it served then,
  // as a read that needs etcd's quorum would show. Thread-safe.
  std::optional<Clock::time_point> answeredBy(const std::string& endpoint) const;
  // The keep-alive window, "2 s" (as TTL).
  std::chrono::seconds ttl() const { return ttl_; }

 private:
  void run();
  bool renew();
  std::string endedText(Clock::time_point now) const;
  void markLost(const std::string& why);  // lost_, then on_lost_

  const std::shared_ptr<Clock> clock_;
  const std::unique_ptr<EtcdApi> client_;
  const std::chrono::milliseconds interval_, retry_;
  const std::chrono::seconds ttl_;
  int64_t id_ = 0;
  Clock::time_point renewed_;  // the thread's: the last renewal etcd took
  int stop_fd_ = -1;           // readable: the thread ends
  mutable std::mutex mutex_;
  std::optional<std::string> lost_;
  std::string answered_by_;          // the endpoint that took the last renewal
  Clock::time_point answered_at_{};  // when
  bool out_of_reach_ = false;
  const std::function<void(const std::string&)> on_lost_, say_;
  std::thread thread_;
};

}  // namespace accel::launcher
