#pragma once
// EtcdClient: a client of etcd's v3 API (issue 34's rendezvous on etcd builds on it), spoken
// through the JSON gateway every etcd from 3.4 on serves on its client port (POST
// /v3/kv/range, put, txn, deleterange; /v3/lease/grant, keepalive, revoke; keys and values
// base64, 64-bit numbers as strings): plain HTTP/1.1 and JSON, which accel already parses, so
// it needs neither gRPC nor protobuf. etcd's v2 API (torch's etcd backends', gone in 3.6) is
// never used.
//
// Several endpoints of one cluster: each call goes to the endpoint that answered last, and one
// that cannot be reached in attempt_timeout, or that says it cannot serve (no leader, shutting
// down), is left for the next in turn, until one answers or the call's timeout ends.
//
// Blocking, each call bounded by options.timeout; not thread-safe (one client per thread).
// Throws accel::NetworkError when no endpoint answered in time, naming each endpoint and what
// it said, and accel::Error when etcd refuses a request (naming the endpoint and etcd's
// message).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/rendezvous/http_connection.h"
#include "launcher/rendezvous/tls_client.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

struct EtcdEndpoint {
  std::string host;
  int port = 2379;
  bool https = false;                    // given as https://
  std::shared_ptr<const TlsClient> tls;  // spoken to over TLS through it (null: plain HTTP)
  std::string text() const;              // "host:port"
};

// "HOST:PORT[,HOST:PORT...]", each optionally with http:// or https:// (torch's etcd backends
// take `--rdzv_endpoint` so); a missing port is etcd's 2379. An error naming the endpoint that is
// not one.
Expected<std::vector<EtcdEndpoint>> parseEtcdEndpoints(const std::string& text);

// TLS for every endpoint when `https` (--rdzv_conf protocol=https) or an endpoint was given as
// https://: one TlsClient reading `files` (cacert, cert, key), shared by them all. An error
// names the file that cannot serve. Blocks only to read the files.
Expected<void> useTls(std::vector<EtcdEndpoint>& endpoints, bool https, const TlsFiles& files);

struct EtcdOptions {
  std::vector<EtcdEndpoint> endpoints;
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};         // a call, in all
  std::chrono::milliseconds attempt_timeout{std::chrono::seconds(2)};  // one endpoint's try
};

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

class EtcdClient {
 public:
  explicit EtcdClient(EtcdOptions options);

  // The version the endpoint in use runs ("3.4.23"): GET /version.
  std::string serverVersion();
  // Sets `key` (attached to `lease`, 0: none); returns the store's revision after it.
  int64_t put(const std::string& key, const std::string& value, int64_t lease = 0);
  std::optional<EtcdKeyValue> get(const std::string& key);
  // Every key that starts with `prefix`, in key order.
  std::vector<EtcdKeyValue> getPrefix(const std::string& prefix);
  // Creates `key` unless it exists (one transaction): true when this call created it.
  bool create(const std::string& key, const std::string& value, int64_t lease = 0);
  // Sets `key` if its mod_revision is still `revision` (0: if it does not exist), in one
  // transaction: true when this call set it.
  bool compareAndSwap(const std::string& key, int64_t revision, const std::string& value,
                      int64_t lease = 0);
  // Sets `key` to `desired` if its value is `expected` (empty: if it does not exist), in one
  // transaction; returns the key as it is afterwards (nullopt: absent).
  std::optional<EtcdKeyValue> compareValueAndSet(const std::string& key,
                                                 const std::string& expected,
                                                 const std::string& desired);
  // How many keys start with `prefix`.
  int64_t countPrefix(const std::string& prefix);
  // Deletes `key`: whether it existed.
  bool remove(const std::string& key);
  // Deletes every key that starts with `prefix`; returns how many there were.
  int64_t deletePrefix(const std::string& prefix);
  // A lease of `ttl` (keys attached to it go when it expires or is revoked); returns its ID.
  int64_t grantLease(std::chrono::seconds ttl);
  // Renews lease `id`; returns its TTL in seconds, 0 once it expired (or never was).
  int64_t keepAlive(int64_t id);
  void revokeLease(int64_t id);

  // The endpoint that answered last.
  const EtcdEndpoint& endpoint() const { return options_.endpoints[current_]; }
  std::string endpointInUse() const { return endpoint().text(); }
  // The store's revision when the last reply was made (its header's).
  int64_t revision() const { return revision_; }
  // Each call's bound (options.timeout).
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // The requests sent so far (every endpoint's tries), for benchmarks.
  uint64_t requests() const { return requests_; }

 private:
  nlohmann::json call(const std::string& path, const nlohmann::json& body);
  std::optional<nlohmann::json> tryEndpoint(size_t at, const std::string& path,
                                            const std::string& body,
                                            HttpConnection::time_point deadline, std::string& said);
  // A transaction: put `key` if `compare` holds, else read it. Returns whether it put, and the
  // key read when it did not.
  std::pair<bool, std::optional<EtcdKeyValue>> txnPut(const nlohmann::json& compare,
                                                      const std::string& key,
                                                      const std::string& value, int64_t lease);

  EtcdOptions options_;
  std::vector<std::unique_ptr<HttpConnection>> connections_;  // one per endpoint
  size_t current_ = 0;
  int64_t revision_ = 0;
  uint64_t requests_ = 0;
};

// One change a watch saw.
struct EtcdEvent {
  bool deleted = false;  // else a put
  EtcdKeyValue kv;       // (a deletion's: the key and its mod_revision)
};

// EtcdWatch: a watch on one endpoint (POST /v3/watch, a stream that stays open), of one key or of
// every key under a prefix, from a revision on — so nothing that happened after a read at that
// revision is missed. One owner; blocking calls bounded by their deadlines.
class EtcdWatch {
 public:
  // Throws accel::NetworkError when `endpoint` does not confirm the watch by `deadline`.
  EtcdWatch(const EtcdEndpoint& endpoint, const std::string& key, bool prefix, int64_t from,
            HttpConnection::time_point deadline);
  // Readable when next() has something (or the stream ended).
  int fd() const { return connection_.fd(); }
  // The events that came by `deadline` (empty: none). Throws accel::NetworkError once the
  // endpoint ended the stream or went away (watch again from the last revision seen, elsewhere).
  std::vector<EtcdEvent> next(HttpConnection::time_point deadline);

 private:
  HttpConnection connection_;
};

}  // namespace accel::launcher
