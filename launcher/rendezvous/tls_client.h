#pragma once
// TlsClient: the TLS side of accel's client of etcd over https (torch's etcd backends'
// `--rdzv_conf protocol=https,cacert=...,cert=...,key=...`): the CA certificate the server's must
// be signed by (cacert; the system's CAs when none is given), and this client's certificate and
// key for an etcd that asks for them (--client-cert-auth; the key may be in cert's file). TLS 1.2
// or later; the server's certificate must name the host the endpoint names (a name or an IP
// address).
//
// The constructor reads the files and throws accel::Error naming the file and OpenSSL's reason
// (or that this accel was built without OpenSSL). handshake() blocks until the handshake is done
// or its deadline, on a socket it makes non-blocking. Thread-safety: one TlsClient may serve
// connections on several threads at once (handshake is const).

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
  // caller closes fd either way. The caller frees the session (SSL_free).
  ssl_st* handshake(int fd, const std::string& host, time_point deadline) const;

  // The last OpenSSL error of this thread as text (and the queue cleared), for messages.
  static std::string lastError();

 private:
  ssl_ctx_st* ctx_ = nullptr;
};

}  // namespace accel::launcher
