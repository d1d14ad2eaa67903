#pragma once
// Transport: one TCP connection to a server, plain or over TLS (a TlsClient's session), that
// HttpConnection (HTTP/1.1: etcd's JSON gateway) and GrpcStream (HTTP/2: etcd's gRPC) speak over.
// Every byte it moves is counted in etcdTraffic() (TLS: the plaintext).
//
// Blocking, every call bounded by its deadline; not thread-safe (one owner). Throws
// accel::NetworkError when the connection cannot be made or fails (it is then closed),
// accel::TlsRefused when either side refused the other's TLS, accel::TimeoutError when the
// deadline comes first (the connection is kept: a reader may look again).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "launcher/rendezvous/etcd/client/tls_client.h"

namespace accel::launcher {

// What this process moved to and from etcd, over every connection: bytes both ways (TLS: the
// plaintext) and watch events received. Counters for benchmarks (scripts/bench/rdzv_scale.cc),
// never reset; thread-safe.
struct EtcdTraffic {
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> events{0};
};
EtcdTraffic& etcdTraffic();

class Transport {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // `tls`: speak TLS through it (null: plain TCP), offering application protocol `alpn` in its
  // handshake when not empty ("h2").
  Transport(std::string host, int port, std::shared_ptr<const TlsClient> tls,
            std::string alpn = "");
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Connects (and shakes hands over TLS).
  void connect(time_point deadline);
  bool connected() const { return fd_ >= 0; }
  // Over TLS: whether the server chose the protocol offered (`alpn`). Plain: true.
  bool agreedProtocol() const;
  void send(std::string_view bytes, time_point deadline);
  // Waits until something can be read (or the server closed); TimeoutError at `deadline`.
  void awaitReadable(time_point deadline);
  // Reads what there is: > 0 bytes, 0 when the server closed the connection, -1 when nothing
  // came yet (wait again).
  long receive(char* buf, size_t size);
  // Bytes TLS decrypted and nobody read yet: the socket's poll cannot see them.
  bool pending() const;
  int fd() const { return fd_; }
  bool tls() const { return tls_ != nullptr; }
  // "host:port", for messages.
  std::string address() const;
  void close();

 private:
  [[noreturn]] void fail(const std::string& what);

  const std::string host_;
  const int port_;
  const std::shared_ptr<const TlsClient> tls_;
  const std::string alpn_;
  int fd_ = -1;
  ssl_st* ssl_ = nullptr;  // the TLS session on fd_
};

}  // namespace accel::launcher
