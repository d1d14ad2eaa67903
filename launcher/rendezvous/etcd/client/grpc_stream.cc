#include "launcher/rendezvous/etcd/client/grpc_stream.h"

#include <cctype>
#include <cstring>
#include <utility>

#if ACCEL_HAVE_NGHTTP2
#include <nghttp2/nghttp2.h>
#endif

namespace accel::launcher {

void protoVarint(std::string& out, int number, uint64_t value) {
  uint64_t tag = static_cast<uint64_t>(number) << 3;  // wire type 0
  for (uint64_t v : {tag, value}) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  }
}

namespace {

uint64_t readVarint(std::string_view m, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && at < m.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(m[at++]);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
  throw NetworkError("etcd's gRPC reply is not protobuf (a varint runs past its end)");
}

}  // namespace

std::vector<ProtoField> protoFields(std::string_view m) {
  std::vector<ProtoField> out;
  for (size_t at = 0; at < m.size();) {
    const uint64_t tag = readVarint(m, at);
    ProtoField f;
    f.number = static_cast<int>(tag >> 3);
    f.wire_type = static_cast<int>(tag & 7);
    if (f.wire_type == 0) {
      f.varint = readVarint(m, at);
    } else if (f.wire_type == 2) {
      const uint64_t len = readVarint(m, at);
      if (len > m.size() - at)
        throw NetworkError("etcd's gRPC reply is not protobuf (a field runs past its end)");
      f.bytes = m.substr(at, len);
      at += len;
    } else if (f.wire_type == 1 || f.wire_type == 5) {
      const size_t len = f.wire_type == 1 ? 8 : 4;
      if (len > m.size() - at)
        throw NetworkError("etcd's gRPC reply is not protobuf (a field runs past its end)");
      at += len;
    } else {
      throw NetworkError("etcd's gRPC reply is not protobuf (wire type " +
                         std::to_string(f.wire_type) + ")");
    }
    out.push_back(f);
  }
  return out;
}

#if ACCEL_HAVE_NGHTTP2

namespace {

// gRPC's message text is percent-encoded.
std::string percentDecoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A header of the request (the strings must outlive its submission).
nghttp2_nv header(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// nghttp2's callbacks, each with the stream as its user data.
struct GrpcStream::Callbacks {
  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    auto* s = static_cast<GrpcStream*>(user);
    if (frame->hd.stream_id != s->stream_) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") s->status_ = std::move(v);
    if (n == "content-type") s->content_type_ = std::move(v);
    if (n == "grpc-status") s->grpc_status_ = std::move(v);
    if (n == "grpc-message") s->grpc_message_ = percentDecoded(v);
    return 0;
  }
  static int onData(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* data, size_t len,
                    void* user) {
    auto* s = static_cast<GrpcStream*>(user);
    if (stream == s->stream_) s->inbox_.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }
  static int onClose(nghttp2_session*, int32_t stream, uint32_t code, void* user) {
    auto* s = static_cast<GrpcStream*>(user);
    if (stream == s->stream_) {
      s->closed_ = true;
      s->reset_code_ = code;
    }
    return 0;
  }
  // The request's DATA: what outbox_ holds; nothing yet defers the stream (never ends it).
  static ssize_t readOutbox(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t*,
                            nghttp2_data_source*, void* user) {
    auto* s = static_cast<GrpcStream*>(user);
    if (s->outbox_.empty()) {
      s->deferred_ = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    const size_t n = std::min(length, s->outbox_.size());
    std::memcpy(buf, s->outbox_.data(), n);
    s->outbox_.erase(0, n);
    return static_cast<ssize_t>(n);
  }
};

GrpcStream::GrpcStream(std::string host, int port, std::shared_ptr<const TlsClient> tls,
                       std::string path, time_point deadline)
    : transport_(std::move(host), port, std::move(tls), "h2") {
  transport_.connect(deadline);
  if (!transport_.agreedProtocol()) {
    throw NotHttp2("its TLS did not agree on HTTP/2 (ALPN h2)");
  }
  try {
    start(path, deadline);
  } catch (...) {
    if (session_) nghttp2_session_del(session_);
    throw;
  }
}

GrpcStream::~GrpcStream() {
  if (session_) nghttp2_session_del(session_);
}

// The session, its SETTINGS and the request's HEADERS, sent.
void GrpcStream::start(const std::string& path, time_point deadline) {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) throw Error("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Callbacks::onHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &Callbacks::onData);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &Callbacks::onClose);
  const int made = nghttp2_session_client_new(&session_, callbacks, this);
  nghttp2_session_callbacks_del(callbacks);
  if (made != 0) throw Error(std::string("nghttp2: ") + nghttp2_strerror(made));
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
  const std::string scheme = transport_.tls() ? "https" : "http", authority = transport_.address();
  const nghttp2_nv headers[] = {
      header(":method", "POST"),
      header(":scheme", scheme),
      header(":path", path),
      header(":authority", authority),
      header("content-type", "application/grpc"),
      header("te", "trailers"),
  };
  nghttp2_data_provider body{};
  body.read_callback = &Callbacks::readOutbox;
  stream_ = nghttp2_submit_request(session_, nullptr, headers, std::size(headers), &body, nullptr);
  if (stream_ < 0) throw Error(std::string("nghttp2: ") + nghttp2_strerror(stream_));
  flush(deadline);
}

// Sends everything nghttp2 has to send (frames, and what outbox_ holds that the windows allow).
void GrpcStream::flush(time_point deadline) {
  while (true) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) throw NetworkError(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) return;
    transport_.send({reinterpret_cast<const char*>(data), static_cast<size_t>(n)}, deadline);
  }
}

// Reads what arrives by `deadline` into the session (its callbacks fill inbox_), and sends what
// that asks for (SETTINGS' acknowledgement, WINDOW_UPDATE, PING's answer).
void GrpcStream::pump(time_point deadline) {
  char buf[16384];
  transport_.awaitReadable(deadline);
  const long n = transport_.receive(buf, sizeof buf);
  if (n < 0) return;
  if (n == 0) {  // (before a byte: a member going down, as likely as a server without HTTP/2)
    transport_.close();
    throw NetworkError("the server closed the connection");
  }
  if (!heard_ && std::string_view(buf, static_cast<size_t>(n)).substr(0, 5) == "HTTP/") {
    transport_.close();
    throw NotHttp2("it answers HTTP/1.x, not HTTP/2");
  }
  heard_ = true;
  const ssize_t used = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buf),
                                                static_cast<size_t>(n));
  if (used < 0) {
    throw NetworkError(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(used)));
  }
  try {
    flush(deadline);
  } catch (const TimeoutError& e) {  // a frame may be half sent: no longer a late reply's wait
    throw NetworkError(std::string("sending: ") + e.what());
  }
}

void GrpcStream::send(std::string_view message, time_point deadline) {
  try {
    if (closed_ || broken_) ended();
    const auto length = static_cast<uint32_t>(message.size());
    outbox_ += '\0';
    for (int shift : {24, 16, 8, 0}) outbox_ += static_cast<char>((length >> shift) & 0xff);
    outbox_ += message;
    if (std::exchange(deferred_, false)) nghttp2_session_resume_data(session_, stream_);
    flush(deadline);
  } catch (const Error&) {
    broken_ = true;  // a frame may be half sent
    throw;
  }
}

std::optional<std::string> GrpcStream::takeMessage() {
  if (inbox_.size() < 5) return std::nullopt;
  if (inbox_[0] != '\0') throw NetworkError("etcd sent a compressed gRPC message");
  uint32_t length = 0;
  for (int i = 1; i < 5; ++i) length = (length << 8) | static_cast<uint8_t>(inbox_[i]);
  if (inbox_.size() < 5 + size_t{length}) return std::nullopt;
  std::string message = inbox_.substr(5, length);
  inbox_.erase(0, 5 + size_t{length});
  return message;
}

std::string GrpcStream::receive(time_point deadline) {
  try {
    while (true) {
      if (auto message = takeMessage()) return std::move(*message);
      if (closed_ || broken_) ended();
      if (!status_.empty() && status_ != "200") ended();
      pump(deadline);
    }
  } catch (const TimeoutError&) {
    throw;  // nothing half read: the reply may come yet
  } catch (const Error&) {
    broken_ = true;
    throw;
  }
}

// Why the stream is over, thrown.
void GrpcStream::ended() {
  closed_ = true;
  if (!status_.empty() && status_ != "200") {
    throw GrpcEnded(0, "", "the server answered HTTP status " + status_ + " to gRPC");
  }
  if (broken_ && !closed_) throw NetworkError("the stream failed before");
  if (!grpc_status_.empty()) {
    const int code = std::atoi(grpc_status_.c_str());
    throw GrpcEnded(
        code, grpc_message_,
        "gRPC status " + grpc_status_ + (grpc_message_.empty() ? "" : " (" + grpc_message_ + ")"));
  }
  throw GrpcEnded(
      0, "", std::string("the server ended the stream: ") + nghttp2_http2_strerror(reset_code_));
}

#else  // built without nghttp2: every server is spoken to over HTTP/1.1

GrpcStream::GrpcStream(std::string host, int port, std::shared_ptr<const TlsClient> tls,
                       std::string, time_point)
    : transport_(std::move(host), port, std::move(tls)) {
  throw NotHttp2("this accel was built without nghttp2 (libnghttp2-dev)");
}
GrpcStream::~GrpcStream() = default;
void GrpcStream::send(std::string_view, time_point) {}
std::string GrpcStream::receive(time_point) { return {}; }

#endif

}  // namespace accel::launcher
