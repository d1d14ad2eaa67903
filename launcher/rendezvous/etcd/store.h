#pragma once
// EtcdStore: the store::Store interface the rounds speak (c10d/rendezvous.h, round_end.h,
// round_close.h) over etcd's v3 API, every key under a prefix of the job's own — so the same
// rules run on a store that no machine of the job hosts. Waits are etcd watches started at the
// revision of the read that found a key missing (nothing written in between is missed); add()
// and compareSet() are transactions (compare-and-swap), so agents on any machine count and
// decide as one.
//
// Not thread-safe (one client, one owner), as the TCP client. Every call is bounded (the
// client's timeout; waits their own) and throws as store.h says: accel::TimeoutError naming the
// keys still missing, accel::NetworkError when no endpoint of the cluster answers.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accel/error.h"
#include "launcher/rendezvous/etcd/client/etcd_client.h"  // realEtcd()
#include "libaccel/store/store.h"

namespace accel::launcher {

class EtcdStore : public store::Store {
 public:
  // Keys live under `prefix` + "/" in the cluster `options` names ("": as they are), reached
  // and waited for through `access`.
  EtcdStore(EtcdOptions options, std::string prefix, const EtcdAccess& access = realEtcd());

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  // The keys under this store's prefix (etcd holds other jobs' too).
  int64_t numKeys() override;
  // In one request per EtcdApi::kMaxTxnOps keys.
  std::vector<std::optional<std::string>> present(const std::vector<std::string>& keys) override;

  EtcdApi& client() { return *client_; }
  // The requests this store sent: the client's, and one per watch opened (for benchmarks).
  uint64_t requests() const { return client_->requests() + watches_; }

 private:
  std::string full(const std::string& key) const { return prefix_ + key; }
  std::optional<std::string> awaitKey(const std::string& key, Clock::time_point deadline);
  TimeoutError timedOut(const std::string& missing, std::chrono::milliseconds timeout) const;

  const std::shared_ptr<Clock> clock_;
  const std::unique_ptr<EtcdApi> client_;
  const std::string prefix_;
  uint64_t watches_ = 0;
};

}  // namespace accel::launcher
