#include "launcher/rendezvous/etcd/client/http_connection.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "accel/error.h"

namespace accel::launcher {
namespace {

std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

HttpConnection::HttpConnection(std::string host, int port, std::shared_ptr<const TlsClient> tls)
    : transport_(std::move(host), port, std::move(tls)) {}

HttpConnection::~HttpConnection() { close(); }

void HttpConnection::close() {
  transport_.close();
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
  const bool reused = transport_.connected();
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
  if (transport_.pending()) return true;  // decrypted, not read yet: poll cannot see it
  return decoded_.find('\n') != std::string::npos || !raw_.empty();
}

void HttpConnection::request(const char* method, const std::string& path, const std::string& body,
                             time_point deadline) {
  if (!transport_.connected()) transport_.connect(deadline);
  raw_.clear();
  decoded_.clear();
  transport_.send(std::string(method) + " " + path + " HTTP/1.1\r\nHost: " + address() +
                      "\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body,
                  deadline);
}

// Appends what arrives before `deadline` to raw_ (at least one byte): true. The server closing
// the connection is a failure, or false when `endIsFine` (a body that ends with it). TimeoutError
// leaves the connection as it is (a stream's reader may look again).
bool HttpConnection::fill(time_point deadline, bool endIsFine) {
  while (true) {
    char buf[16384];
    transport_.awaitReadable(deadline);
    const long n = transport_.receive(buf, sizeof buf);
    if (n < 0) continue;  // a TLS record not whole yet
    if (n == 0 && endIsFine) return false;
    if (n == 0 && raw_.empty() && !transport_.tls() && awaiting_head_) {
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
