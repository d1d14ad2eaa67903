#pragma once
// TlsClient: the TLS side of accel's client of etcd over https (torch's etcd backends'
// `--rdzv_conf protocol=https,cacert=...,cert=...,key=...`): the CA certificate the server's must
// be signed by (cacert; the system's CAs when none is given), and this client's certificate and
// key for an etcd that asks for them (--client-cert-auth; the key may be in cert's file). TLS 1.2
// or later; the server's certificate must name the host the endpoint names (a name or an IP
// address).
//
// OpenSSL (libssl.so.3) is loaded with dlopen when the first TlsClient is made, not linked: a job
// that does not speak TLS to etcd — nearly all — does not pay for loading it (about 1 ms of every
// `accel` start, measured). The constructor reads the files and throws accel::Error naming the
// file and OpenSSL's reason (or that OpenSSL cannot be loaded, or that this accel was built
// without its headers). handshake() blocks until the handshake is done or its deadline, on a
// socket it makes non-blocking. Thread-safety: one TlsClient may serve connections on several
// threads at once (its methods are const; a session is its connection's).

#include <chrono>
#include <memory>
#include <string>

#include "accel/error.h"

struct ssl_st;      // OpenSSL's SSL
struct ssl_ctx_st;  // and SSL_CTX

namespace accel::launcher {

// The server refused this client's TLS, or this client the server's certificate: a setting to
// mend (a CA, a certificate, a key), not a fault that passes; retrying will not help.
class TlsRefused : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

struct TlsFiles {
  std::string cacert;  // PEM CA certificate(s); empty: the system's
  std::string cert;    // PEM client certificate; empty: none
  std::string key;     // PEM private key of cert; empty: in cert's file
};

class TlsClient {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit TlsClient(const TlsFiles& files);
  ~TlsClient();
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // A TLS session on the connected socket `fd` (made non-blocking) with the server's
  // certificate checked against `host`, once its handshake is done. Throws TlsRefused with
  // OpenSSL's reason when either side refused the other ("the server's certificate: ..."),
  // NetworkError when the connection failed, TimeoutError when `deadline` comes first; the
  // caller closes fd either way. The caller frees the session (SSL_free). `alpn` (not empty):
  // the application protocol offered ("h2"); selectedProtocol() says whether the server took it.
  ssl_st* handshake(int fd, const std::string& host, time_point deadline,
                    const std::string& alpn = "") const;
  // The application protocol the server chose in the handshake ("": none).
  std::string selectedProtocol(ssl_st* session) const;

  // I/O on a session of handshake() (its socket non-blocking): the bytes moved (> 0), 0 when the
  // server closed the connection, kWantRead / kWantWrite when the socket must be ready for that
  // first. Throws NetworkError when the connection failed, TlsRefused when the server refused
  // this client (its alert).
  static constexpr long kWantRead = -1, kWantWrite = -2;
  long read(ssl_st* session, char* buf, size_t size) const;
  long write(ssl_st* session, const char* buf, size_t size) const;
  // Whether the session holds decrypted bytes not read yet (poll cannot see them).
  bool pending(ssl_st* session) const;
  void free(ssl_st* session) const;

 private:
  ssl_ctx_st* ctx_ = nullptr;
};

}  // namespace accel::launcher
