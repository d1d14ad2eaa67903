#pragma once
// HttpConnection: one HTTP/1.1 connection to a server that speaks JSON over POST — etcd's v3
// gateway (etcd/client/etcd_client.h) — plain, or over TLS when given a TlsClient (https). A
// request's reply is read whole (Content-Length or chunked); a streaming reply (etcd's watch) is
// read one newline-delimited message at a time. The connection is kept for the next request while
// the server keeps it.
//
// Blocking, every call bounded by its deadline; not thread-safe (one owner). Throws
// accel::NetworkError when the server cannot be reached, closes the connection or answers out of
// protocol, accel::TimeoutError when the deadline comes first (their messages say what went
// wrong, not where: the caller names the server); the connection is then dropped (the next
// request makes a new one), but a stream's reader whose deadline came first may look again.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "launcher/rendezvous/etcd/client/transport.h"

namespace accel::launcher {

class HttpConnection {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  struct Reply {
    int status = 0;
    std::string body;
  };

  // `tls`: speak HTTPS through it (null: plain HTTP).
  HttpConnection(std::string host, int port, std::shared_ptr<const TlsClient> tls = nullptr);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // POSTs `body` (JSON) to `path` and reads the whole reply (of any status).
  Reply post(const std::string& path, const std::string& body, time_point deadline);
  // GETs `path`.
  Reply get(const std::string& path, time_point deadline);

  // POSTs `body` to `path` and reads the reply's status and headers; its body is a stream of
  // messages read with nextMessage(). Returns the status (a body of an error status is read by
  // nextMessage too).
  int openStream(const std::string& path, const std::string& body, time_point deadline);
  // The stream's next message (one line of its body, without the newline); nullopt when the
  // server ended the stream.
  std::optional<std::string> nextMessage(time_point deadline);
  // The connection's descriptor (-1: none), readable when the stream has more (or the server
  // closed it). Buffered bytes may hold a whole message already: call nextMessage with a
  // deadline of now first.
  int fd() const { return transport_.fd(); }
  bool buffered() const;

  // "host:port", for messages.
  std::string address() const { return transport_.address(); }
  void close();

 private:
  // One request and its whole reply (post, get).
  Reply exchange(const char* method, const std::string& path, const std::string& body,
                 time_point deadline);
  void request(const char* method, const std::string& path, const std::string& body,
               time_point deadline);
  int readHead(time_point deadline);
  std::string readBody(time_point deadline);
  bool decodeChunk(time_point deadline);
  bool fill(time_point deadline, bool endIsFine = false);
  std::string takeLine(time_point deadline);
  [[noreturn]] void fail(const std::string& what);

  Transport transport_;
  std::string raw_;             // bytes received and not yet parsed
  std::string decoded_;         // body bytes of a chunked stream not yet returned
  bool chunked_ = false;        // the current reply's body
  long long length_ = -1;       // its Content-Length (-1: none)
  bool ended_ = false;          // its last chunk was read
  bool keep_ = true;            // the server keeps the connection after this reply
  bool awaiting_head_ = false;  // reading a reply's status line
};

}  // namespace accel::launcher
