#pragma once
// EtcdApi: what the rounds on etcd (etcd/meeting.h, etcd/lease.h, etcd/link.h, etcd/store.h,
// etcd/rounds.h) ask of etcd — keys, transactions, leases, watches — behind one seam, with the
// clock they wait by (EtcdAccess). In production EtcdClient (etcd/client/etcd_client.h) speaks to a
// real cluster and the clock is MonotonicClock; in the tests a simulated cluster answers in
// simulated time (tests/launcher/rendezvous/sim_etcd.h), where a lease expires, and an endpoint
// goes down or silent, at the instant the test chooses.
//
// Contracts, for every implementation: blocking, each call bounded by timeout(); not
// thread-safe (one client per thread); throws accel::NetworkError when no endpoint answered in
// time (naming each endpoint and what it said), accel::Error when etcd refuses a request.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/base/clock.h"

namespace accel::launcher {

class TlsClient;

struct EtcdEndpoint {
  std::string host;
  int port = 2379;
  bool https = false;                    // given as https://
  std::shared_ptr<const TlsClient> tls;  // spoken to over TLS through it (null: plain HTTP)
  std::string text() const;              // "host:port"
};

struct EtcdOptions {
  std::vector<EtcdEndpoint> endpoints;
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};         // a call, in all
  std::chrono::milliseconds attempt_timeout{std::chrono::seconds(2)};  // one endpoint's try
  // The endpoint a client tries first (modulo their number): the agents of a job spread over
  // them, so that one endpoint gone is every agent's problem only for its share of them.
  size_t first_endpoint = 0;
  // Lease renewals on one kept gRPC stream per endpoint (HTTP/2) where the endpoint speaks it;
  // false: every call through the JSON gateway (the benchmarks' reference).
  bool renew_over_grpc = true;
};

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// What EtcdApi::enroll did: its transaction's revision, whether it created the key it was to
// create, and the key it read as that transaction saw it.
struct EtcdEnrollment {
  int64_t revision = 0;
  bool created = false;
  std::optional<EtcdKeyValue> read;
};

// One change a watch saw.
struct EtcdEvent {
  bool deleted = false;  // else a put
  EtcdKeyValue kv;       // (a deletion's: the key and its mod_revision)
  EtcdKeyValue prev;     // a deletion's: the key as it was before (its value, create_revision)
};

// A watch of one key or of every key under a prefix, from a revision on — so nothing that
// happened after a read at that revision is missed — on the endpoint that opened it. One owner.
class EtcdWatchStream {
 public:
  virtual ~EtcdWatchStream() = default;
  // Readable when next() has something (or the stream ended).
  virtual int fd() const = 0;
  // The events that came by `deadline` (empty: none). Throws accel::NetworkError once the
  // endpoint ended the stream or went away (watch again from the last revision seen, elsewhere).
  virtual std::vector<EtcdEvent> next(Clock::time_point deadline) = 0;
};

class EtcdApi {
 public:
  virtual ~EtcdApi() = default;

  // Sets `key` (attached to `lease`, 0: none); returns the store's revision after it.
  virtual int64_t put(const std::string& key, const std::string& value, int64_t lease = 0) = 0;
  // One transaction: sets every key of `keyValues` and, when neither `create` nor `unless`
  // exists, creates `create` with `value` (all attached to `lease`), and reads `unless`. A
  // transaction its client sent again (no answer in time) counts as having created `create` when
  // that key holds `value` under `lease`. What three calls would do (a transaction of the puts,
  // get, create), in one request and one write of etcd's log.
  virtual EtcdEnrollment enroll(const std::vector<std::pair<std::string, std::string>>& keyValues,
                                const std::string& create, const std::string& value,
                                const std::string& unless, int64_t lease) = 0;
  virtual std::optional<EtcdKeyValue> get(const std::string& key) = 0;
  // Each of `keys` (nullopt: absent), read at one revision per kMaxTxnOps keys: a transaction of
  // reads, one request each.
  virtual std::vector<std::optional<EtcdKeyValue>> getMany(
      const std::vector<std::string>& keys) = 0;
  static constexpr size_t kMaxTxnOps = 128;  // etcd's default --max-txn-ops
  // Every key that starts with `prefix`, in key order.
  virtual std::vector<EtcdKeyValue> getPrefix(const std::string& prefix) = 0;
  // Creates `key` unless it exists (one transaction): true when this call created it.
  virtual bool create(const std::string& key, const std::string& value, int64_t lease = 0) = 0;
  // Sets `key` if its mod_revision is still `revision` (0: if it does not exist), in one
  // transaction: true when this call set it.
  virtual bool compareAndSwap(const std::string& key, int64_t revision, const std::string& value,
                              int64_t lease = 0) = 0;
  // Sets `key` to `desired` if its value is `expected` (empty: if it does not exist), in one
  // transaction; returns the key as it is afterwards (nullopt: absent).
  virtual std::optional<EtcdKeyValue> compareValueAndSet(const std::string& key,
                                                         const std::string& expected,
                                                         const std::string& desired) = 0;
  // How many keys start with `prefix`.
  virtual int64_t countPrefix(const std::string& prefix) = 0;
  // Of the keys that start with `prefix`, the first in key order that is not before `from`;
  // nullopt: none. One range request of one key, which etcd finds in its index without reading
  // the others (a sorted or filtered range reads them all).
  virtual std::optional<EtcdKeyValue> firstKeyFrom(const std::string& prefix,
                                                   const std::string& from) = 0;
  // Deletes `key`: whether it existed.
  virtual bool remove(const std::string& key) = 0;
  // Deletes every key that starts with `prefix`; returns how many there were.
  virtual int64_t deletePrefix(const std::string& prefix) = 0;
  // A lease of `ttl` (keys attached to it go when it expires or is revoked); returns its ID.
  virtual int64_t grantLease(std::chrono::seconds ttl) = 0;
  // Renews lease `id`; returns its TTL in seconds, 0 once it expired (or never was).
  virtual int64_t keepAlive(int64_t id) = 0;
  virtual void revokeLease(int64_t id) = 0;

  // A watch of `key` (every key under it when `prefix`) from revision `from` on, on the endpoint
  // in use; throws accel::NetworkError when that endpoint does not confirm it by `deadline`.
  virtual std::unique_ptr<EtcdWatchStream> watch(const std::string& key, bool prefix, int64_t from,
                                                 Clock::time_point deadline) = 0;
  // A client of the endpoint in use alone, each call bounded by `timeout`: what asks a watch's
  // endpoint whether it still serves (a read that needs etcd's quorum).
  virtual std::unique_ptr<EtcdApi> pinned(std::chrono::milliseconds timeout) const = 0;

  // "host:port" of the endpoint the next call tries first (the one that answered last, unless one
  // failed since).
  virtual std::string endpointInUse() const = 0;
  // Leaves `endpoint` ("host:port") for the next one when it is the one in use: another client of
  // this agent (a pinned one) found it silent. No request.
  virtual void passOver(const std::string& endpoint) = 0;
  // The store's revision when the last reply was made (its header's).
  virtual int64_t revision() const = 0;
  // Each call's bound.
  virtual std::chrono::milliseconds timeout() const = 0;
  // The requests sent so far (every endpoint's tries), for benchmarks.
  virtual uint64_t requests() const = 0;
};

// A client of the cluster `options` name.
using EtcdConnect = std::function<std::unique_ptr<EtcdApi>(const EtcdOptions&)>;

// How the etcd code reaches etcd and tells the time.
struct EtcdAccess {
  EtcdConnect connect;
  std::shared_ptr<Clock> clock;
};

// EtcdClients and a MonotonicClock (etcd/client/etcd_client.cc).
EtcdAccess realEtcd();

}  // namespace accel::launcher
