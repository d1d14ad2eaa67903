#pragma once
// GrpcStream: one gRPC call's bidirectional stream — requests one way, replies the other, as
// etcd's LeaseKeepAlive — over an HTTP/2 connection of its own (RFC 9113), plain TCP with prior
// knowledge (h2c, which etcd's client port serves beside its JSON gateway) or TLS that agreed on
// "h2" (ALPN). nghttp2 frames it; a message is gRPC's (a byte saying "not compressed", its length
// in four, then the protobuf), and protoVarint / protoFields below write and read the few
// protobuf messages accel sends etcd this way. A renewal over a kept stream is one small DATA
// frame each way, where the JSON gateway opens and closes a stream of its own for each (etcd's
// members spend about a third of the CPU per renewal: scripts/bench/rdzv_scale.sh --idle).
//
// Blocking, every call bounded by its deadline; not thread-safe (one owner). Throws NotHttp2 when
// the server does not speak HTTP/2 there (an HTTP/1.x answer, TLS without "h2", or an accel built
// without nghttp2): speak HTTP/1.1 to it instead; GrpcEnded when the server ended the stream (its
// gRPC status); accel::NetworkError when the connection fails; accel::TimeoutError when the
// deadline comes first. After any of them the stream is over — make a new one — but for
// receive()'s TimeoutError: the reply may still come, and the next receive() returns it (replies
// come in the order of their requests: the caller counts what it is owed).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accel/error.h"
#include "launcher/rendezvous/etcd/client/transport.h"

struct nghttp2_session;

namespace accel::launcher {

class NotHttp2 : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

// The server ended the stream: gRPC's status code (0 when it gave none) and message.
class GrpcEnded : public NetworkError {
 public:
  GrpcEnded(int code, std::string message, const std::string& what)
      : NetworkError(what), code_(code), message_(std::move(message)) {}
  int code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  int code_;
  std::string message_;
};

// Protobuf's wire format, as far as etcd's few messages here need it.
// Appends field `number` holding `value` as a varint (int64, uint64, bool).
void protoVarint(std::string& out, int number, uint64_t value);
struct ProtoField {
  int number = 0;
  int wire_type = 0;       // 0: varint, 2: length-delimited (others are skipped)
  uint64_t varint = 0;     // wire type 0's value
  std::string_view bytes;  // wire type 2's (a view into the message)
};
// The fields of `message` in order; throws accel::NetworkError when it is not protobuf.
std::vector<ProtoField> protoFields(std::string_view message);

class GrpcStream {
 public:
  using time_point = Transport::time_point;

  // Connects to host:port and opens a stream of method `path` ("/etcdserverpb.Lease/
  // LeaseKeepAlive"); `tls`: over TLS through it (null: h2c).
  GrpcStream(std::string host, int port, std::shared_ptr<const TlsClient> tls, std::string path,
             time_point deadline);
  ~GrpcStream();
  GrpcStream(const GrpcStream&) = delete;
  GrpcStream& operator=(const GrpcStream&) = delete;

  // Sends one message (its protobuf).
  void send(std::string_view message, time_point deadline);
  // The next message the server sent (its protobuf).
  std::string receive(time_point deadline);
  // Whether the stream can still be used (no failure but receive()'s time running out).
  bool usable() const { return !broken_; }

 private:
  struct Callbacks;
  void start(const std::string& path, time_point deadline);
  void flush(time_point deadline);
  void pump(time_point deadline);
  std::optional<std::string> takeMessage();  // a whole message from inbox_ (nullopt: none yet)
  [[noreturn]] void ended();

  Transport transport_;
  nghttp2_session* session_ = nullptr;
  int32_t stream_ = -1;
  std::string outbox_;       // framed messages not handed to nghttp2 yet
  bool deferred_ = false;    // nghttp2 waits for outbox_ to fill (resume it)
  std::string inbox_;        // the stream's DATA not taken yet
  bool heard_ = false;       // the server sent something (so it speaks HTTP/2)
  bool closed_ = false;      // the stream ended
  bool broken_ = false;      // a call failed: the stream is over
  uint32_t reset_code_ = 0;  // how (HTTP/2's error code; 0: ended by the server's trailers)
  std::string status_, grpc_status_, grpc_message_, content_type_;
};

}  // namespace accel::launcher
