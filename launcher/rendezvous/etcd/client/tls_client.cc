#include "launcher/rendezvous/etcd/client/tls_client.h"

#include "accel/error.h"

#if ACCEL_HAVE_OPENSSL
#include <arpa/inet.h>
#include <dlfcn.h>
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

// The OpenSSL functions accel calls, looked up in libssl.so.3 (and the libcrypto it loads) once.
struct OpenSsl {
// clang-format off
#define ACCEL_SSL_FN(name) decltype(&::name) name = nullptr;
#define ACCEL_SSL_FUNCTIONS(X) \
  X(TLS_client_method) \
  X(SSL_CTX_new) \
  X(SSL_CTX_free) \
  X(SSL_CTX_ctrl) \
  X(SSL_CTX_set_verify) \
  X(SSL_CTX_set_default_verify_paths) \
  X(SSL_CTX_load_verify_locations) \
  X(SSL_CTX_use_certificate_chain_file) \
  X(SSL_CTX_use_PrivateKey_file) \
  X(SSL_CTX_check_private_key) \
  X(SSL_new) \
  X(SSL_free) \
  X(SSL_ctrl) \
  X(SSL_get0_param) \
  X(SSL_set_fd) \
  X(SSL_connect) \
  X(SSL_get_error) \
  X(SSL_get_verify_result) \
  X(SSL_read) \
  X(SSL_write) \
  X(SSL_pending) \
  X(SSL_set_alpn_protos) \
  X(SSL_get0_alpn_selected) \
  X(X509_VERIFY_PARAM_set1_ip_asc) \
  X(X509_VERIFY_PARAM_set1_host) \
  X(X509_verify_cert_error_string) \
  X(ERR_get_error) \
  X(ERR_peek_last_error) \
  X(ERR_error_string_n) \
  X(ERR_reason_error_string)
  // clang-format on
  ACCEL_SSL_FUNCTIONS(ACCEL_SSL_FN)
  std::string error;  // why it could not be loaded ("": loaded)
};

const OpenSsl& openSsl() {
  static const OpenSsl loaded = [] {
    OpenSsl o;
    void* lib = ::dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      o.error = std::string("cannot load OpenSSL (libssl3): ") + ::dlerror();
      return o;
    }
#define ACCEL_SSL_LOAD(name)                                        \
  o.name = reinterpret_cast<decltype(o.name)>(::dlsym(lib, #name)); \
  if (!o.name && o.error.empty()) o.error = "OpenSSL's libssl.so.3 has no " #name;
    ACCEL_SSL_FUNCTIONS(ACCEL_SSL_LOAD)
    return o;
  }();
  return loaded;
}

const OpenSsl& ssl() {
  const OpenSsl& o = openSsl();
  if (!o.error.empty()) throw Error("TLS to etcd: " + o.error);
  return o;
}

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

// The last OpenSSL error of this thread as text (and the queue cleared), for messages.
std::string lastError() {
  const OpenSsl& o = ssl();
  std::string text;
  while (const unsigned long e = o.ERR_get_error()) {
    char buf[256];
    o.ERR_error_string_n(e, buf, sizeof buf);
    const char* reason = o.ERR_reason_error_string(e);
    text = reason ? reason : buf;  // the last one is the most specific
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

}  // namespace

TlsClient::TlsClient(const TlsFiles& files) {
  const OpenSsl& o = ssl();
  ctx_ = o.SSL_CTX_new(o.TLS_client_method());
  if (!ctx_) throw Error("TLS: cannot make a context: " + lastError());
  o.SSL_CTX_ctrl(ctx_, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr);
  o.SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  auto failed = [this, &o](const std::string& what) {
    const std::string reason = lastError();
    o.SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw Error(what + ": " + reason);
  };
  if (files.cacert.empty()
          ? o.SSL_CTX_set_default_verify_paths(ctx_) != 1
          : o.SSL_CTX_load_verify_locations(ctx_, files.cacert.c_str(), nullptr) != 1) {
    failed(files.cacert.empty()
               ? "TLS: cannot load the system's CA certificates"
               : "cacert=" + files.cacert + ": not a PEM CA certificate that can be read");
  }
  if (!files.cert.empty() && o.SSL_CTX_use_certificate_chain_file(ctx_, files.cert.c_str()) != 1) {
    failed("cert=" + files.cert + ": not a PEM certificate that can be read");
  }
  if (files.cert.empty() && !files.key.empty()) {
    failed("key=" + files.key + ": a key without cert= (give the certificate it belongs to)");
  }
  const std::string& key = files.key.empty() ? files.cert : files.key;
  if (key.empty()) return;
  if (o.SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatch = ERR_GET_REASON(o.ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    failed((files.key.empty() ? "cert=" : "key=") + key +
           (mismatch ? ": not the key of cert=" + files.cert
                     : std::string(": no PEM private key that can be read")));
  }
  if (o.SSL_CTX_check_private_key(ctx_) != 1) {
    failed("key=" + key + ": not the key of cert=" + files.cert);
  }
}

TlsClient::~TlsClient() {
  if (ctx_) openSsl().SSL_CTX_free(ctx_);
}

ssl_st* TlsClient::handshake(int fd, const std::string& host, time_point deadline,
                             const std::string& alpn) const {
  const OpenSsl& o = ssl();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  SSL* session = o.SSL_new(ctx_);
  if (!session) throw NetworkError("TLS: " + lastError());
  X509_VERIFY_PARAM* param = o.SSL_get0_param(session);
  const bool named =
      isIpAddress(host)
          ? o.X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1
          : o.SSL_ctrl(session, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                       const_cast<char*>(host.c_str())) == 1 &&
                o.X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) == 1;
  if (!named) {
    o.SSL_free(session);
    throw NetworkError("TLS: cannot check the server's certificate against '" + host + "'");
  }
  // ALPN's list: each name after its length in one byte. (0 is success here.)
  const std::string offered = alpn.empty() ? "" : char(alpn.size()) + alpn;
  if (!offered.empty() &&
      o.SSL_set_alpn_protos(session, reinterpret_cast<const unsigned char*>(offered.data()),
                            static_cast<unsigned>(offered.size())) != 0) {
    o.SSL_free(session);
    throw NetworkError("TLS: cannot offer application protocol '" + alpn + "'");
  }
  o.SSL_set_fd(session, fd);
  try {
    while (true) {
      const int rc = o.SSL_connect(session);
      if (rc == 1) return session;
      const int err = o.SSL_get_error(session, rc);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        awaitSocket(fd, err, deadline, "handshake");
        continue;
      }
      if (err == SSL_ERROR_SYSCALL) {
        throw NetworkError(std::string("TLS handshake failed: ") +
                           (errno ? std::strerror(errno) : "the server closed the connection"));
      }
      const long verify = o.SSL_get_verify_result(session);
      throw TlsRefused("TLS handshake failed: " + (verify != X509_V_OK
                                                       ? std::string("the server's certificate: ") +
                                                             o.X509_verify_cert_error_string(verify)
                                                       : lastError()));
    }
  } catch (...) {
    o.SSL_free(session);
    throw;
  }
}

namespace {

// What an SSL_read (`reading`) or SSL_write that returned `n` means: n bytes, the socket to wait
// for, the server's close (a read's 0), or an error thrown.
long ioOutcome(const OpenSsl& o, ssl_st* session, int n, bool reading) {
  if (n > 0) return n;
  const int err = o.SSL_get_error(session, n);
  if (err == SSL_ERROR_WANT_READ) return TlsClient::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return TlsClient::kWantWrite;
  if (reading && (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0)))
    return 0;
  const std::string what = reading ? "receiving failed: " : "sending the request failed: ";
  if (err == SSL_ERROR_SYSCALL) throw NetworkError(what + std::strerror(errno));
  throw TlsRefused((reading ? "the server refused this client's TLS: " : what) +
                   lastError());  // a read's: the server's alert
}

}  // namespace

long TlsClient::read(ssl_st* session, char* buf, size_t size) const {
  const OpenSsl& o = ssl();
  return ioOutcome(o, session, o.SSL_read(session, buf, static_cast<int>(size)), true);
}

long TlsClient::write(ssl_st* session, const char* buf, size_t size) const {
  const OpenSsl& o = ssl();
  return ioOutcome(o, session, o.SSL_write(session, buf, static_cast<int>(size)), false);
}

bool TlsClient::pending(ssl_st* session) const { return ssl().SSL_pending(session) > 0; }

std::string TlsClient::selectedProtocol(ssl_st* session) const {
  const unsigned char* name = nullptr;
  unsigned len = 0;
  ssl().SSL_get0_alpn_selected(session, &name, &len);
  return name ? std::string(reinterpret_cast<const char*>(name), len) : "";
}

void TlsClient::free(ssl_st* session) const { ssl().SSL_free(session); }

#else  // built without OpenSSL's headers

TlsClient::TlsClient(const TlsFiles&) {
  throw Error("this accel was built without OpenSSL (libssl-dev), so it cannot speak TLS to etcd");
}

TlsClient::~TlsClient() = default;

ssl_st* TlsClient::handshake(int, const std::string&, time_point, const std::string&) const {
  throw NetworkError("this accel was built without OpenSSL");
}
std::string TlsClient::selectedProtocol(ssl_st*) const { return ""; }
long TlsClient::read(ssl_st*, char*, size_t) const { return 0; }
long TlsClient::write(ssl_st*, const char*, size_t) const { return 0; }
bool TlsClient::pending(ssl_st*) const { return false; }
void TlsClient::free(ssl_st*) const {}

#endif

}  // namespace accel::launcher
