#include "launcher/rendezvous/etcd/client/transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "accel/error.h"
#include "libaccel/store/tcp_connect.h"

namespace accel::launcher {
namespace {

int msUntil(Transport::time_point deadline) {
  return static_cast<int>(std::clamp<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                            std::chrono::steady_clock::now())
          .count(),
      0, 1 << 30));
}

}  // namespace

EtcdTraffic& etcdTraffic() {
  static EtcdTraffic traffic;
  return traffic;
}

Transport::Transport(std::string host, int port, std::shared_ptr<const TlsClient> tls,
                     std::string alpn)
    : host_(std::move(host)), port_(port), tls_(std::move(tls)), alpn_(std::move(alpn)) {}

Transport::~Transport() { close(); }

std::string Transport::address() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

void Transport::close() {
  if (ssl_) tls_->free(ssl_);  // no close_notify: the peer learns it from the TCP close
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Transport::fail(const std::string& what) {
  close();
  throw NetworkError(what);
}

void Transport::connect(time_point deadline) {
  std::string why;
  fd_ = store::connectTcp(host_, port_, deadline, why);
  if (fd_ < 0) throw NetworkError("cannot connect: " + why);
  if (!tls_) return;
  try {
    ssl_ = tls_->handshake(fd_, host_, deadline, alpn_);
  } catch (const Error&) {
    close();
    throw;
  }
}

bool Transport::agreedProtocol() const {
  return !ssl_ || alpn_.empty() || tls_->selectedProtocol(ssl_) == alpn_;
}

void Transport::send(std::string_view bytes, time_point deadline) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n;
    if (ssl_) {
      try {
        n = tls_->write(ssl_, bytes.data() + off, bytes.size() - off);
      } catch (const Error&) {
        close();
        throw;
      }
      if (n == TlsClient::kWantRead || n == TlsClient::kWantWrite) {
        pollfd pfd{fd_, static_cast<short>(n == TlsClient::kWantWrite ? POLLOUT : POLLIN), 0};
        if (::poll(&pfd, 1, msUntil(deadline)) == 0)
          throw TimeoutError("the request was not taken in time");
        continue;
      }
    } else {
      n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd pfd{fd_, POLLOUT, 0};
        if (::poll(&pfd, 1, msUntil(deadline)) == 0)
          throw TimeoutError("the request was not taken in time");
        continue;
      }
      if (n < 0) fail(std::string("sending the request failed: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
    etcdTraffic().bytes += static_cast<uint64_t>(n);
    if (msUntil(deadline) == 0 && off < bytes.size())
      throw TimeoutError("the request was not taken in time");
  }
}

void Transport::awaitReadable(time_point deadline) {
  if (pending()) return;
  while (true) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, msUntil(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) throw TimeoutError("no reply in time");
    return;
  }
}

long Transport::receive(char* buf, size_t size) {
  if (ssl_) {
    try {
      const long n = tls_->read(ssl_, buf, size);
      if (n > 0) etcdTraffic().bytes += static_cast<uint64_t>(n);
      return n == TlsClient::kWantRead || n == TlsClient::kWantWrite ? -1 : n;
    } catch (const Error&) {
      close();
      throw;
    }
  }
  while (true) {
    const ssize_t n = ::recv(fd_, buf, size, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    if (n < 0) fail(std::string("receiving failed: ") + std::strerror(errno));
    etcdTraffic().bytes += static_cast<uint64_t>(n);
    return n;
  }
}

bool Transport::pending() const { return ssl_ && tls_->pending(ssl_); }

}  // namespace accel::launcher
