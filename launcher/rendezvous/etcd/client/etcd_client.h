#pragma once
// EtcdClient: a client of etcd's v3 API (issue 34's rendezvous on etcd builds on it), spoken
// through the JSON gateway every etcd from 3.4 on serves on its client port (POST
// /v3/kv/range, put, txn, deleterange; /v3/lease/grant, keepalive, revoke; keys and values
// base64, 64-bit numbers as strings): plain HTTP/1.1 and JSON, which accel already parses, so
// it needs neither gRPC nor protobuf. etcd's v2 API (torch's etcd backends', gone in 3.6) is
// never used.
//
// The lease's renewals (keepAlive) are the one call every agent makes every keep-alive interval
// for the whole job: they go on one gRPC stream per endpoint that stays open
// (etcd/client/grpc_stream.h), as etcd's own clients keep them, unless the endpoint does not speak
// HTTP/2 (then, and with options.renew_over_grpc false, through the gateway too).
//
// Several endpoints of one cluster: each call goes to the endpoint that answered last, and one
// that cannot be reached in attempt_timeout, or that says it cannot serve (no leader, shutting
// down), is left for the next in turn, until one answers or the call's timeout ends.
//
// EtcdApi's contracts (etcd/api.h), each call bounded by options.timeout; etcd's refusals name
// the endpoint and etcd's message.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/rendezvous/etcd/api.h"
#include "launcher/rendezvous/etcd/client/grpc_stream.h"
#include "launcher/rendezvous/etcd/client/http_connection.h"
#include "launcher/rendezvous/etcd/client/tls_client.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// "HOST:PORT[,HOST:PORT...]", each optionally with http:// or https:// (torch's etcd backends
// take `--rdzv_endpoint` so); a missing port is etcd's 2379. An error naming the endpoint that is
// not one.
Expected<std::vector<EtcdEndpoint>> parseEtcdEndpoints(const std::string& text);

// TLS for every endpoint when `https` (--rdzv_conf protocol=https) or an endpoint was given as
// https://: one TlsClient reading `files` (cacert, cert, key), shared by them all. An error
// names the file that cannot serve. Blocks only to read the files.
Expected<void> useTls(std::vector<EtcdEndpoint>& endpoints, bool https, const TlsFiles& files);

class EtcdClient : public EtcdApi {
 public:
  explicit EtcdClient(EtcdOptions options);

  // The version the endpoint in use runs ("3.4.23"): GET /version.
  std::string serverVersion();
  // EtcdApi (etcd/api.h):
  int64_t put(const std::string& key, const std::string& value, int64_t lease = 0) override;
  EtcdEnrollment enroll(const std::vector<std::pair<std::string, std::string>>& keyValues,
                        const std::string& create, const std::string& value,
                        const std::string& unless, int64_t lease) override;
  std::optional<EtcdKeyValue> get(const std::string& key) override;
  std::vector<std::optional<EtcdKeyValue>> getMany(const std::vector<std::string>& keys) override;
  std::vector<EtcdKeyValue> getPrefix(const std::string& prefix) override;
  bool create(const std::string& key, const std::string& value, int64_t lease = 0) override;
  bool compareAndSwap(const std::string& key, int64_t revision, const std::string& value,
                      int64_t lease = 0) override;
  std::optional<EtcdKeyValue> compareValueAndSet(const std::string& key,
                                                 const std::string& expected,
                                                 const std::string& desired) override;
  int64_t countPrefix(const std::string& prefix) override;
  std::optional<EtcdKeyValue> firstKeyFrom(const std::string& prefix,
                                           const std::string& from) override;
  bool remove(const std::string& key) override;
  int64_t deletePrefix(const std::string& prefix) override;
  int64_t grantLease(std::chrono::seconds ttl) override;
  int64_t keepAlive(int64_t id) override;
  void revokeLease(int64_t id) override;
  std::unique_ptr<EtcdWatchStream> watch(const std::string& key, bool prefix, int64_t from,
                                         Clock::time_point deadline) override;
  std::unique_ptr<EtcdApi> pinned(std::chrono::milliseconds timeout) const override;
  std::string endpointInUse() const override { return endpoint().text(); }
  void passOver(const std::string& endpoint) override;
  int64_t revision() const override { return revision_; }
  std::chrono::milliseconds timeout() const override { return options_.timeout; }
  uint64_t requests() const override { return requests_; }

  // The endpoint the next call tries first: the one that answered last, or the one after an
  // endpoint that failed since.
  const EtcdEndpoint& endpoint() const { return options_.endpoints[current_]; }

 private:
  // Tries endpoint after endpoint (see call()) until `tryAt(at, deadline, said)` answers true;
  // throws NetworkError naming `what` and what each endpoint said when none did in time.
  void acrossEndpoints(
      const std::string& what,
      const std::function<bool(size_t, HttpConnection::time_point, std::string&)>& tryAt);
  nlohmann::json call(const std::string& path, const nlohmann::json& body);
  // One renewal of lease `id` on endpoint `at`'s kept stream (the gateway's where it speaks no
  // HTTP/2): its TTL, or nullopt with what went wrong in `said`.
  std::optional<int64_t> renewOn(size_t at, int64_t id, HttpConnection::time_point deadline,
                                 std::string& said);
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
  std::vector<std::unique_ptr<GrpcStream>> renewals_;         // one per endpoint (null: none open)
  std::vector<int> owed_;    // per endpoint: renewals its stream has not answered yet (late)
  std::vector<bool> http2_;  // per endpoint: renewals go over gRPC (it did not say otherwise)
  size_t current_ = 0;
  int64_t revision_ = 0;
  uint64_t requests_ = 0;
};

// EtcdWatch: a watch on one endpoint (POST /v3/watch, a stream that stays open), of one key or of
// every key under a prefix, from a revision on — so nothing that happened after a read at that
// revision is missed. One owner; blocking calls bounded by their deadlines.
class EtcdWatch : public EtcdWatchStream {
 public:
  // Throws accel::NetworkError when `endpoint` does not confirm the watch by `deadline`.
  EtcdWatch(const EtcdEndpoint& endpoint, const std::string& key, bool prefix, int64_t from,
            HttpConnection::time_point deadline);
  // EtcdWatchStream (etcd/api.h):
  int fd() const override { return connection_.fd(); }
  std::vector<EtcdEvent> next(Clock::time_point deadline) override;

 private:
  HttpConnection connection_;
};

}  // namespace accel::launcher
