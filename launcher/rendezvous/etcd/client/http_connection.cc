#include "launcher/rendezvous/etcd/client/http_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "accel/error.h"
#include "libaccel/store/tcp_connect.h"

namespace accel::launcher {
namespace {

long long msUntil(HttpConnection::time_point deadline) {
  return std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
}

std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

HttpConnection::HttpConnection(std::string host, int port, std::shared_ptr<const TlsClient> tls)
    : host_(std::move(host)), port_(port), tls_(std::move(tls)) {}

HttpConnection::~HttpConnection() { close(); }

std::string HttpConnection::address() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

void HttpConnection::close() {
  if (ssl_) tls_->free(ssl_);  // no close_notify: the peer learns it from the TCP close
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  raw_.clear();
  decoded_.clear();
}

void HttpConnection::fail(const std::string& what) {
  close();
  throw NetworkError(what);
}

HttpConnection::Reply HttpConnection::post(const std::string& path, const std::string& body,
                                           time_point deadline) {
  return exchange("POST", path, body, deadline);
}

HttpConnection::Reply HttpConnection::get(const std::string& path, time_point deadline) {
  return exchange("GET", path, "", deadline);
}

HttpConnection::Reply HttpConnection::exchange(const char* method, const std::string& path,
                                               const std::string& body, time_point deadline) {
  // A kept connection the server closed meanwhile fails before any reply: once more, afresh.
  const bool reused = fd_ >= 0;
  for (int attempt = 0;; ++attempt) {
    try {
      request(method, path, body, deadline);
      Reply reply;
      reply.status = readHead(deadline);
      reply.body = readBody(deadline);
      return reply;
    } catch (const TimeoutError&) {
      close();
      throw;
    } catch (const NetworkError&) {
      close();
      if (!reused || attempt > 0) throw;
    }
  }
}

int HttpConnection::openStream(const std::string& path, const std::string& body,
                               time_point deadline) {
  try {
    request("POST", path, body, deadline);
    return readHead(deadline);
  } catch (const Error&) {
    close();
    throw;
  }
}

std::optional<std::string> HttpConnection::nextMessage(time_point deadline) {
  while (true) {
    if (const size_t nl = decoded_.find('\n'); nl != std::string::npos) {
      std::string line = decoded_.substr(0, nl);
      decoded_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) return line;
      continue;
    }
    if (ended_) {
      if (decoded_.empty()) return std::nullopt;
      return std::exchange(decoded_, {});
    }
    if (!chunked_) {  // a reply of a known length (an error): all of it, as one message
      decoded_ += readBody(deadline);
      ended_ = true;
      continue;
    }
    decodeChunk(deadline);
  }
}

bool HttpConnection::buffered() const {
  if (ssl_ && tls_->pending(ssl_)) return true;  // decrypted, not read yet: poll cannot see it
  return decoded_.find('\n') != std::string::npos || !raw_.empty();
}

void HttpConnection::connect(time_point deadline) {
  std::string why;
  fd_ = store::connectTcp(host_, port_, deadline, why);
  if (fd_ < 0) throw NetworkError("cannot connect: " + why);
  if (!tls_) return;
  try {
    ssl_ = tls_->handshake(fd_, host_, deadline);
  } catch (const Error&) {
    close();
    throw;
  }
}

void HttpConnection::send(const std::string& bytes, time_point deadline) {
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
        if (::poll(&pfd, 1, static_cast<int>(std::min<long long>(msUntil(deadline), 1 << 30))) == 0)
          throw TimeoutError("the request was not taken in time");
        continue;
      }
    } else {
      n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(std::string("sending the request failed: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
    etcdTraffic().bytes += static_cast<uint64_t>(n);
    if (msUntil(deadline) == 0 && off < bytes.size())
      throw TimeoutError("the request was not taken in time");
  }
}

EtcdTraffic& etcdTraffic() {
  static EtcdTraffic traffic;
  return traffic;
}

long HttpConnection::receive(char* buf, size_t size) {
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
    const ssize_t n = ::recv(fd_, buf, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("receiving failed: ") + std::strerror(errno));
    etcdTraffic().bytes += static_cast<uint64_t>(n);
    return n;
  }
}

void HttpConnection::request(const char* method, const std::string& path, const std::string& body,
                             time_point deadline) {
  if (fd_ < 0) connect(deadline);
  raw_.clear();
  decoded_.clear();
  send(std::string(method) + " " + path + " HTTP/1.1\r\nHost: " + address() +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body,
       deadline);
}

// Appends what arrives before `deadline` to raw_ (at least one byte): true. The server closing
// the connection is a failure, or false when `endIsFine` (a body that ends with it). TimeoutError
// leaves the connection as it is (a stream's reader may look again).
bool HttpConnection::fill(time_point deadline, bool endIsFine) {
  while (true) {
    char buf[16384];
    const bool pending = ssl_ && tls_->pending(ssl_);
    if (!pending) {
      pollfd pfd{fd_, POLLIN, 0};
      const int ready =
          ::poll(&pfd, 1, static_cast<int>(std::min<long long>(msUntil(deadline), 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) throw TimeoutError("no reply in time");
    }
    const long n = receive(buf, sizeof buf);
    if (n < 0) continue;  // a TLS record not whole yet
    if (n == 0 && endIsFine) return false;
    if (n == 0 && raw_.empty() && !tls_ && awaiting_head_) {
      fail(
          "the server closed the connection without a reply (if it serves https: add "
          "protocol=https to --rdzv_conf)");
    }
    if (n == 0) fail("the server closed the connection");
    raw_.append(buf, static_cast<size_t>(n));
    return true;
  }
}

std::string HttpConnection::takeLine(time_point deadline) {
  size_t eol;
  while ((eol = raw_.find("\r\n")) == std::string::npos) fill(deadline);
  std::string line = raw_.substr(0, eol);
  raw_.erase(0, eol + 2);
  return line;
}

// The status line and the headers that shape the body; returns the status.
int HttpConnection::readHead(time_point deadline) {
  chunked_ = false;
  length_ = -1;
  ended_ = false;
  keep_ = true;
  awaiting_head_ = true;
  const std::string status = takeLine(deadline);
  awaiting_head_ = false;
  if (status.rfind("HTTP/1.", 0) != 0 || status.size() < 12) {
    fail("answers out of protocol (not HTTP/1.x): '" + status.substr(0, 60) + "'");
  }
  const int code = std::atoi(status.c_str() + 9);
  keep_ = status.rfind("HTTP/1.0", 0) != 0;  // 1.0 closes unless it says otherwise
  for (std::string line = takeLine(deadline); !line.empty(); line = takeLine(deadline)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = lowered(line.substr(0, colon));
    const std::string value = lowered(line.substr(line.find_first_not_of(' ', colon + 1)));
    if (name == "content-length") length_ = std::atoll(value.c_str());
    if (name == "transfer-encoding") chunked_ = value.find("chunked") != std::string::npos;
    if (name == "connection") keep_ = value.find("close") == std::string::npos;
  }
  // Neither a length nor chunks: the body ends with the connection (HTTP/1.0's way).
  if (!chunked_ && length_ < 0 && keep_) fail("a reply with neither a length nor chunks");
  return code;
}

std::string HttpConnection::readBody(time_point deadline) {
  std::string body;
  if (chunked_) {
    while (decodeChunk(deadline)) {
    }
    body = std::exchange(decoded_, {});
  } else if (length_ < 0) {
    while (fill(deadline, true)) {
    }
    body = std::exchange(raw_, {});
    ended_ = true;
  } else {
    while (static_cast<long long>(raw_.size()) < length_) fill(deadline);
    body = raw_.substr(0, static_cast<size_t>(length_));
    raw_.erase(0, static_cast<size_t>(length_));
    ended_ = true;
  }
  if (!keep_) close();
  return body;
}

// Moves the next whole chunk of raw_ to decoded_ (true), or reads the last one and its trailers
// (false, ended_). Consumes nothing until a whole chunk is there, so a stream's reader whose
// deadline came first may look again.
bool HttpConnection::decodeChunk(time_point deadline) {
  while (true) {
    if (const size_t eol = raw_.find("\r\n"); eol != std::string::npos) {
      char* end = nullptr;
      const long long size = std::strtoll(raw_.c_str(), &end, 16);
      if (end == raw_.c_str() || size < 0) {
        fail("a chunk size that is not one: '" + raw_.substr(0, std::min<size_t>(eol, 40)) + "'");
      }
      const size_t n = static_cast<size_t>(size);
      if (n == 0) {
        if (const size_t blank = raw_.find("\r\n\r\n", eol); blank != std::string::npos) {
          raw_.erase(0, blank + 4);  // the trailers (etcd's gateway sends some), then a blank line
          ended_ = true;
          return false;
        }
      } else if (raw_.size() >= eol + 2 + n + 2) {
        if (raw_.compare(eol + 2 + n, 2, "\r\n") != 0) fail("a chunk without its CRLF");
        decoded_.append(raw_, eol + 2, n);
        raw_.erase(0, eol + 2 + n + 2);
        return true;
      }
    }
    fill(deadline);
  }
}

}  // namespace accel::launcher
