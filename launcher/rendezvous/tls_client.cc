#include "launcher/rendezvous/tls_client.h"

#include "accel/error.h"

#if ACCEL_HAVE_OPENSSL
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

namespace accel::launcher {

#if ACCEL_HAVE_OPENSSL

namespace {

bool isIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Waits until fd is ready for what OpenSSL asked (`want`: SSL_ERROR_WANT_READ or _WRITE), or
// throws TimeoutError at `deadline`.
void awaitSocket(int fd, int want, TlsClient::time_point deadline, const char* what) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd pfd{fd, static_cast<short>(want == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN), 0};
    const int ready =
        ::poll(&pfd, 1, static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) throw TimeoutError(std::string("no TLS ") + what + " in time");
    return;
  }
}

}  // namespace

std::string TlsClient::lastError() {
  std::string text;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    const char* reason = ERR_reason_error_string(e);
    text = reason ? reason : buf;  // the last one is the most specific
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

TlsClient::TlsClient(const TlsFiles& files) {
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (!ctx_) throw Error("TLS: cannot make a context: " + lastError());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  auto failed = [this](const std::string& what) {
    const std::string reason = lastError();
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw Error(what + ": " + reason);
  };
  if (files.cacert.empty()
          ? SSL_CTX_set_default_verify_paths(ctx_) != 1
          : SSL_CTX_load_verify_locations(ctx_, files.cacert.c_str(), nullptr) != 1) {
    failed(files.cacert.empty()
               ? "TLS: cannot load the system's CA certificates"
               : "cacert=" + files.cacert + ": not a PEM CA certificate that can be read");
  }
  if (!files.cert.empty() && SSL_CTX_use_certificate_chain_file(ctx_, files.cert.c_str()) != 1) {
    failed("cert=" + files.cert + ": not a PEM certificate that can be read");
  }
  if (files.cert.empty() && !files.key.empty()) {
    failed("key=" + files.key + ": a key without cert= (give the certificate it belongs to)");
  }
  const std::string& key = files.key.empty() ? files.cert : files.key;
  if (!key.empty()) {
    if (SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM) != 1) {
      const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
      failed((files.key.empty() ? "cert=" : "key=") + key +
             (mismatch ? ": not the key of cert=" + files.cert
                       : std::string(": no PEM private key that can be read")));
    }
    if (SSL_CTX_check_private_key(ctx_) != 1) {
      failed("key=" + key + ": not the key of cert=" + files.cert);
    }
  }
}

TlsClient::~TlsClient() { SSL_CTX_free(ctx_); }

ssl_st* TlsClient::handshake(int fd, const std::string& host, time_point deadline) const {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  SSL* ssl = SSL_new(ctx_);
  if (!ssl) throw NetworkError("TLS: " + lastError());
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  const bool ip = isIpAddress(host);
  if (ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1
         : (SSL_set_tlsext_host_name(ssl, host.c_str()) != 1 ||
            X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) != 1)) {
    SSL_free(ssl);
    throw NetworkError("TLS: cannot check the server's certificate against '" + host + "'");
  }
  SSL_set_fd(ssl, fd);
  try {
    while (true) {
      const int rc = SSL_connect(ssl);
      if (rc == 1) return ssl;
      const int err = SSL_get_error(ssl, rc);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        awaitSocket(fd, err, deadline, "handshake");
        continue;
      }
      const long verify = SSL_get_verify_result(ssl);
      if (err == SSL_ERROR_SYSCALL) {
        throw NetworkError(std::string("TLS handshake failed: ") +
                           (errno ? std::strerror(errno) : "the server closed the connection"));
      }
      std::string why = verify != X509_V_OK ? std::string("the server's certificate: ") +
                                                  X509_verify_cert_error_string(verify)
                                            : lastError();
      throw TlsRefused("TLS handshake failed: " + why);
    }
  } catch (...) {
    SSL_free(ssl);
    throw;
  }
}

#else  // built without OpenSSL

std::string TlsClient::lastError() { return "built without OpenSSL"; }

TlsClient::TlsClient(const TlsFiles&) {
  throw Error("this accel was built without OpenSSL (libssl-dev), so it cannot speak TLS to etcd");
}

TlsClient::~TlsClient() = default;

ssl_st* TlsClient::handshake(int, const std::string&, time_point) const {
  throw NetworkError("this accel was built without OpenSSL");
}

#endif

}  // namespace accel::launcher
