#include "launcher/rendezvous/etcd/client/etcd_client.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "accel/error.h"
#include "launcher/base/numbers.h"
#include "launcher/base/text.h"

namespace accel::launcher {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// A call's pause after every endpoint failed at once (refused, no leader), before it tries them
// again: not a busy loop against a cluster that is starting.
constexpr std::chrono::milliseconds kRetryPause{50};
// No try starts with less time left than this: a wait that ended a millisecond early (epoll
// counts whole milliseconds) must not hand the call's last instant to the next endpoint — the
// call's time was the try's, and the next call starts elsewhere.
constexpr std::chrono::milliseconds kLeastTry{5};

const char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::string& in) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kBase64[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += std::string{kBase64[(v >> 18) & 63], kBase64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out +=
        std::string{kBase64[(v >> 18) & 63], kBase64[(v >> 12) & 63], kBase64[(v >> 6) & 63], '='};
  }
  return out;
}

std::string unbase64(const std::string& in) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : in) {
    const char* at = std::strchr(kBase64, c);
    if (c == '=' || !c || !at) break;
    v = (v << 6) | static_cast<uint32_t>(at - kBase64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

// etcd's 64-bit numbers come as JSON strings; proto3 leaves out zeros and false.
int64_t number(const json& j, const char* field) {
  if (!j.contains(field)) return 0;
  const json& v = j.at(field);
  if (!v.is_string()) return v.get<int64_t>();
  const std::string text = v.get<std::string>();
  if (auto n = parseInteger(text)) return *n;
  throw NetworkError(std::string("etcd's reply has ") + field + " '" + text.substr(0, 40) +
                     "', not a number");
}

EtcdKeyValue keyValueOf(const json& kv) {
  EtcdKeyValue out;
  out.key = unbase64(kv.value("key", ""));
  out.value = unbase64(kv.value("value", ""));
  out.create_revision = number(kv, "create_revision");
  out.mod_revision = number(kv, "mod_revision");
  out.version = number(kv, "version");
  out.lease = number(kv, "lease");
  return out;
}

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string prefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<uint8_t>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

// A transaction's comparison that holds while `key` does not exist.
json absent(const std::string& key) {
  return {
      {"key", base64(key)}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}};
}

// An error etcd answers when this member cannot serve now, while another may.
bool memberUnavailable(const json& error) {
  const int code = error.value("code", error.value("grpc_code", 0));  // a stream's: grpc_code
  const std::string message = error.value("message", error.value("error", std::string()));
  // An overloaded member: its proposal did not commit in the member's time (the gateway says
  // code 2 with the context's words), or it sheds load. Tried again, as etcd's own client does.
  const bool overloaded = message.find("context deadline exceeded") != std::string::npos ||
                          message.find("request timed out") != std::string::npos ||
                          message.find("too many requests") != std::string::npos;
  return code == 14 || code == 4 || overloaded || message.find("no leader") != std::string::npos ||
         message.find("leader changed") != std::string::npos;
}

}  // namespace

std::string EtcdEndpoint::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Expected<std::vector<EtcdEndpoint>> parseEtcdEndpoints(const std::string& text) {
  std::vector<EtcdEndpoint> out;
  for (std::string_view part : splitOn(text, ',')) {
    const std::string item(part);
    std::string e(trimmed(part));
    EtcdEndpoint ep;
    if (e.rfind("https://", 0) == 0) {
      ep.https = true;
      e = e.substr(8);
    } else if (e.rfind("http://", 0) == 0) {
      e = e.substr(7);
    }
    if (!e.empty() && e.back() == '/') e.pop_back();
    const size_t colon = e.rfind(':');
    const bool bracketed = !e.empty() && e.front() == '[';
    if (colon == std::string::npos || (bracketed && e[colon - 1] != ']')) {
      ep.host = bracketed ? e.substr(1, e.size() - 2) : e;
    } else {
      ep.host = bracketed ? e.substr(1, colon - 2) : e.substr(0, colon);
      const std::string port = e.substr(colon + 1);
      char* end = nullptr;
      const long p = std::strtol(port.c_str(), &end, 10);
      if (port.empty() || *end || p < 1 || p > 65535) {
        return makeError("etcd endpoint '" + item + "': '" + port + "' is not a port");
      }
      ep.port = static_cast<int>(p);
    }
    if (ep.host.empty()) return makeError("etcd endpoint '" + item + "' is not HOST:PORT");
    out.push_back(ep);
  }
  if (out.empty()) return makeError("no etcd endpoint given");
  return out;
}

Expected<void> useTls(std::vector<EtcdEndpoint>& endpoints, bool https, const TlsFiles& files) {
  const bool any = https || std::any_of(endpoints.begin(), endpoints.end(),
                                        [](const EtcdEndpoint& e) { return e.https; });
  if (!any) return {};
  std::shared_ptr<const TlsClient> tls;
  try {
    tls = std::make_shared<const TlsClient>(files);
  } catch (const Error& e) {
    return makeError(e.what());
  }
  for (auto& e : endpoints) e.tls = tls;
  return {};
}

EtcdClient::EtcdClient(EtcdOptions options) : options_(std::move(options)) {
  if (options_.endpoints.empty()) throw Error("EtcdClient: no endpoint");
  for (const auto& e : options_.endpoints) {
    if (e.https && !e.tls) throw Error("EtcdClient: https endpoint " + e.text() + " without TLS");
    connections_.push_back(std::make_unique<HttpConnection>(e.host, e.port, e.tls));
  }
  renewals_.resize(connections_.size());
  owed_.assign(connections_.size(), 0);
  http2_.assign(connections_.size(), options_.renew_over_grpc);
  current_ = options_.first_endpoint % connections_.size();
}

// Endpoint after endpoint, from the one that answered last (or the one after the last that
// failed), until one answers or the time is up; a round of them all that failed at once pauses
// kRetryPause before the next.
void EtcdClient::acrossEndpoints(
    const std::string& what,
    const std::function<bool(size_t, HttpConnection::time_point, std::string&)>& tryAt) {
  const auto deadline = SteadyClock::now() + options_.timeout;
  std::vector<std::string> said(connections_.size());
  size_t at = current_;
  for (size_t tries = 0;; ++tries) {
    const bool fullTry = tries == 0 || deadline - SteadyClock::now() >= options_.attempt_timeout;
    if (tryAt(at, deadline, said[at])) {
      current_ = at;
      return;
    }
    // The next try starts at the next endpoint, and so does the next call: a call whose time ran
    // out on a silent one must not leave the calls after it to the same fate. But an endpoint
    // tried with less than its attempt's time left (the call's own end cut it short) is not to
    // blame: the next call starts at the one after the last endpoint that had its full try.
    at = (at + 1) % connections_.size();
    if (fullTry) current_ = at;
    if (deadline - SteadyClock::now() < kLeastTry) break;
    if ((tries + 1) % connections_.size() == 0) std::this_thread::sleep_for(kRetryPause);
  }
  std::string all;
  for (size_t i = 0; i < connections_.size(); ++i) {
    all += (all.empty() ? "" : "; ") + options_.endpoints[i].text() + ": " +
           (said[i].empty() ? "not tried" : said[i]);
  }
  throw NetworkError("no etcd endpoint answered " + what + " within " +
                     secondsText(options_.timeout) + " (" + all + ")");
}

json EtcdClient::call(const std::string& path, const json& body) {
  const std::string text = body.dump();
  json out;
  acrossEndpoints(path, [&](size_t at, HttpConnection::time_point deadline, std::string& said) {
    auto reply = tryEndpoint(at, path, text, deadline, said);
    if (reply) out = std::move(*reply);
    return reply.has_value();
  });
  return out;
}

// One endpoint's try: its reply, or nullopt with what went wrong in `said` (it could not be
// reached, or it cannot serve now). Throws accel::Error when etcd refuses the request.
std::optional<json> EtcdClient::tryEndpoint(size_t at, const std::string& path,
                                            const std::string& body,
                                            HttpConnection::time_point deadline,
                                            std::string& said) {
  HttpConnection& c = *connections_[at];
  ++requests_;
  const auto until = std::min(deadline, SteadyClock::now() + options_.attempt_timeout);
  HttpConnection::Reply reply;
  try {
    reply = path == "/version" ? c.get(path, until) : c.post(path, body, until);
  } catch (const TlsRefused& e) {
    throw TlsRefused("etcd at " + c.address() + ": " + e.what());  // no retry mends it
  } catch (const TimeoutError& e) {
    if (said.empty()) said = e.what();  // else what it said before the call's time ran out
    return std::nullopt;
  } catch (const Error& e) {
    said = e.what();
    return std::nullopt;
  }
  json parsed = json::parse(reply.body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    // Go's answer to plain HTTP on a TLS port.
    if (reply.body.find("HTTP request to an HTTPS server") != std::string::npos) {
      said =
          "it serves https: add protocol=https to --rdzv_conf (with cacert=, and cert= and "
          "key= if it asks for a client certificate)";
      return std::nullopt;
    }
    said = "HTTP " + std::to_string(reply.status) + " and no JSON: is it etcd's client port?";
    return std::nullopt;
  }
  // A streaming call (keepalive, watch) that failed still answers 200: {"error": {...}}.
  if (reply.status == 200 && parsed.contains("error") && !parsed.contains("result") &&
      parsed["error"].is_object()) {
    json inner = parsed["error"];
    parsed = std::move(inner);
    reply.status = parsed.value("http_code", 500);
  }
  if (reply.status == 200) {
    const json& header = parsed.contains("result") ? parsed["result"] : parsed;
    if (header.contains("header")) revision_ = number(header["header"], "revision");
    return parsed;
  }
  if (memberUnavailable(parsed)) {
    said = parsed.value("message", parsed.value("error", std::string("unavailable")));
    return std::nullopt;
  }
  throw Error("etcd at " + c.address() + " refused " + path + ": " +
              parsed.value("message", parsed.value("error", reply.body)));
}

std::string EtcdClient::serverVersion() {
  return call("/version", json::object()).value("etcdserver", "");
}

int64_t EtcdClient::put(const std::string& key, const std::string& value, int64_t lease) {
  json body{{"key", base64(key)}, {"value", base64(value)}};
  if (lease) body["lease"] = std::to_string(lease);
  return number(call("/v3/kv/put", body).value("header", json::object()), "revision");
}

namespace {
json putRequest(const std::string& key, const std::string& value, int64_t lease) {
  json put{{"key", base64(key)}, {"value", base64(value)}};
  if (lease) put["lease"] = std::to_string(lease);
  return {{"request_put", put}};
}
// The first key a transaction's range responses hold (nullopt: none).
std::optional<EtcdKeyValue> rangeReply(const json& response) {
  const json range = response.value("response_range", json::object());
  if (!range.contains("kvs") || range["kvs"].empty()) return std::nullopt;
  return keyValueOf(range["kvs"][0]);
}
}  // namespace

EtcdEnrollment EtcdClient::enroll(const std::vector<std::pair<std::string, std::string>>& keyValues,
                                  const std::string& create, const std::string& value,
                                  const std::string& unless, int64_t lease) {
  json success = json::array(), failure = json::array();
  for (const auto& [key, v] : keyValues) {
    success.push_back(putRequest(key, v, lease));
    failure.push_back(putRequest(key, v, lease));
  }
  success.push_back(putRequest(create, value, lease));
  failure.push_back({{"request_range", {{"key", base64(unless)}}}});
  failure.push_back({{"request_range", {{"key", base64(create)}}}});
  const json reply = call("/v3/kv/txn", {{"compare", json::array({absent(create), absent(unless)})},
                                         {"success", success},
                                         {"failure", failure}});
  EtcdEnrollment out;
  out.revision = number(reply.value("header", json::object()), "revision");
  if (reply.value("succeeded", false)) {
    out.created = true;
    return out;
  }
  const json responses = reply.value("responses", json::array());
  const size_t at = keyValues.size();
  if (responses.size() < at + 2) throw Error("etcd answered a transaction without its reads");
  out.read = rangeReply(responses[at]);
  const auto made = rangeReply(responses[at + 1]);
  out.created = made && made->value == value && made->lease == lease && lease != 0;
  return out;
}

std::optional<EtcdKeyValue> EtcdClient::get(const std::string& key) {
  const json reply = call("/v3/kv/range", {{"key", base64(key)}});
  if (!reply.contains("kvs") || reply["kvs"].empty()) return std::nullopt;
  return keyValueOf(reply["kvs"][0]);
}

std::vector<std::optional<EtcdKeyValue>> EtcdClient::getMany(const std::vector<std::string>& keys) {
  std::vector<std::optional<EtcdKeyValue>> out;
  for (size_t from = 0; from < keys.size(); from += kMaxTxnOps) {
    json reads = json::array();
    for (size_t i = from; i < std::min(keys.size(), from + kMaxTxnOps); ++i) {
      reads.push_back({{"request_range", {{"key", base64(keys[i])}}}});
    }
    const json reply = call("/v3/kv/txn", {{"success", reads}});
    const json responses = reply.value("responses", json::array());
    if (responses.size() != reads.size())
      throw Error("etcd answered a transaction without its reads");
    for (const auto& r : responses) out.push_back(rangeReply(r));
  }
  return out;
}

std::vector<EtcdKeyValue> EtcdClient::getPrefix(const std::string& prefix) {
  const json reply =
      call("/v3/kv/range", {{"key", base64(prefix)}, {"range_end", base64(prefixEnd(prefix))}});
  std::vector<EtcdKeyValue> out;
  for (const auto& kv : reply.value("kvs", json::array())) out.push_back(keyValueOf(kv));
  return out;
}

std::pair<bool, std::optional<EtcdKeyValue>> EtcdClient::txnPut(const json& compare,
                                                                const std::string& key,
                                                                const std::string& value,
                                                                int64_t lease) {
  const json reply =
      call("/v3/kv/txn", {{"compare", json::array({compare})},
                          {"success", json::array({putRequest(key, value, lease)})},
                          {"failure", json::array({{{"request_range", {{"key", base64(key)}}}}})}});
  if (reply.value("succeeded", false)) return {true, std::nullopt};
  for (const auto& r : reply.value("responses", json::array())) {
    if (auto kv = rangeReply(r)) return {false, kv};
  }
  return {false, std::nullopt};
}

bool EtcdClient::create(const std::string& key, const std::string& value, int64_t lease) {
  return compareAndSwap(key, 0, value, lease);
}

bool EtcdClient::compareAndSwap(const std::string& key, int64_t revision, const std::string& value,
                                int64_t lease) {
  const json compare = revision == 0 ? absent(key)
                                     : json{{"key", base64(key)},
                                            {"result", "EQUAL"},
                                            {"target", "MOD"},
                                            {"mod_revision", std::to_string(revision)}};
  return txnPut(compare, key, value, lease).first;
}

std::optional<EtcdKeyValue> EtcdClient::compareValueAndSet(const std::string& key,
                                                           const std::string& expected,
                                                           const std::string& desired) {
  const json compare = expected.empty() ? absent(key)
                                        : json{{"key", base64(key)},
                                               {"result", "EQUAL"},
                                               {"target", "VALUE"},
                                               {"value", base64(expected)}};
  auto [put, current] = txnPut(compare, key, desired, 0);
  if (!put) return current;
  EtcdKeyValue now;
  now.key = key;
  now.value = desired;
  now.mod_revision = revision_;
  return now;
}

int64_t EtcdClient::countPrefix(const std::string& prefix) {
  return number(call("/v3/kv/range", {{"key", base64(prefix)},
                                      {"range_end", base64(prefixEnd(prefix))},
                                      {"count_only", true}}),
                "count");
}

std::optional<EtcdKeyValue> EtcdClient::firstKeyFrom(const std::string& prefix,
                                                     const std::string& from) {
  if (from.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const json reply =
      call("/v3/kv/range",
           {{"key", base64(from)}, {"range_end", base64(prefixEnd(prefix))}, {"limit", "1"}});
  if (!reply.contains("kvs") || reply["kvs"].empty()) return std::nullopt;
  return keyValueOf(reply["kvs"][0]);
}

bool EtcdClient::remove(const std::string& key) {
  return number(call("/v3/kv/deleterange", {{"key", base64(key)}}), "deleted") > 0;
}

int64_t EtcdClient::deletePrefix(const std::string& prefix) {
  return number(call("/v3/kv/deleterange",
                     {{"key", base64(prefix)}, {"range_end", base64(prefixEnd(prefix))}}),
                "deleted");
}

int64_t EtcdClient::grantLease(std::chrono::seconds ttl) {
  return number(call("/v3/lease/grant", {{"TTL", std::to_string(ttl.count())}}), "ID");
}

int64_t EtcdClient::keepAlive(int64_t id) {
  int64_t ttl = 0;
  acrossEndpoints("/v3/lease/keepalive",
                  [&](size_t at, HttpConnection::time_point deadline, std::string& said) {
                    const auto renewed = renewOn(at, id, deadline, said);
                    if (renewed) ttl = *renewed;
                    return renewed.has_value();
                  });
  return ttl;
}

namespace {
// A LeaseKeepAliveResponse (etcd's rpc.proto): header = 1 (its revision = 3), ID = 2, TTL = 3
// (0 when the lease is gone: left out; etcd never sends less, but a TTL is read as int64).
struct Renewal {
  int64_t revision = 0, id = 0, ttl = 0;
};
Renewal renewalOf(const std::string& reply) {
  Renewal r;
  for (const ProtoField& f : protoFields(reply)) {
    if (f.number == 1 && f.wire_type == 2) {
      for (const ProtoField& h : protoFields(f.bytes)) {
        if (h.number == 3 && h.wire_type == 0) r.revision = static_cast<int64_t>(h.varint);
      }
    }
    if (f.number == 2 && f.wire_type == 0) r.id = static_cast<int64_t>(f.varint);
    if (f.number == 3 && f.wire_type == 0) r.ttl = static_cast<int64_t>(f.varint);
  }
  return r;
}
}  // namespace

std::optional<int64_t> EtcdClient::renewOn(size_t at, int64_t id,
                                           HttpConnection::time_point deadline, std::string& said) {
  if (!http2_[at]) {  // A stream of one request and one reply: {"result": {"ID", "TTL"}}.
    const auto reply = tryEndpoint(at, "/v3/lease/keepalive",
                                   json{{"ID", std::to_string(id)}}.dump(), deadline, said);
    if (!reply) return std::nullopt;
    return std::max<int64_t>(0, number(reply->value("result", json::object()), "TTL"));
  }
  ++requests_;
  const auto until = std::min(deadline, SteadyClock::now() + options_.attempt_timeout);
  const EtcdEndpoint& e = options_.endpoints[at];
  auto& stream = renewals_[at];
  // An endpoint that owes this many replies is not slow but gone: a new connection.
  constexpr int kMostOwed = 3;
  if (stream && (!stream->usable() || owed_[at] >= kMostOwed)) stream.reset();
  try {
    if (!stream) {
      owed_[at] = 0;
      stream = std::make_unique<GrpcStream>(e.host, e.port, e.tls,
                                            "/etcdserverpb.Lease/LeaseKeepAlive", until);
    }
    std::string request;
    protoVarint(request, 1, static_cast<uint64_t>(id));
    stream->send(request, until);
    ++owed_[at];
    // A reply that came late (its renewal's time ran out: the member was slow, not gone) is
    // read first: replies come in the order of their requests.
    std::string reply;
    while (owed_[at] > 0) {
      reply = stream->receive(until);
      --owed_[at];
    }
    const Renewal r = renewalOf(reply);
    if (r.id != id)
      throw NetworkError("it renewed lease " + std::to_string(r.id) + ", not " +
                         std::to_string(id));
    if (r.revision) revision_ = r.revision;
    return std::max<int64_t>(0, r.ttl);
  } catch (const NotHttp2&) {
    stream.reset();
    http2_[at] = false;  // this endpoint's renewals go through its gateway from now on
    --requests_;
    return renewOn(at, id, deadline, said);
  } catch (const TlsRefused& ex) {
    throw TlsRefused("etcd at " + e.text() + ": " + ex.what());  // no retry mends it
  } catch (const GrpcEnded& ex) {
    stream.reset();
    if (!memberUnavailable({{"code", ex.code()}, {"message", ex.message()}}) && ex.code() != 0) {
      throw Error("etcd at " + e.text() + " refused a lease's renewal: " + ex.message());
    }
    said = ex.what();
  } catch (const TimeoutError& ex) {     // kept (usable() says whether it still can be)
    if (said.empty()) said = ex.what();  // else what it said before the call's time ran out
  } catch (const Error& ex) {
    stream.reset();
    said = ex.what();
  }
  return std::nullopt;
}

void EtcdClient::revokeLease(int64_t id) { call("/v3/lease/revoke", {{"ID", std::to_string(id)}}); }

std::unique_ptr<EtcdWatchStream> EtcdClient::watch(const std::string& key, bool prefix,
                                                   int64_t from, Clock::time_point deadline) {
  return std::make_unique<EtcdWatch>(endpoint(), key, prefix, from, deadline);
}

void EtcdClient::passOver(const std::string& e) {
  if (endpoint().text() == e) current_ = (current_ + 1) % connections_.size();
}

std::unique_ptr<EtcdApi> EtcdClient::pinned(std::chrono::milliseconds timeout) const {
  EtcdOptions alone = options_;
  alone.endpoints = {endpoint()};
  alone.timeout = alone.attempt_timeout = timeout;
  alone.first_endpoint = 0;
  return std::make_unique<EtcdClient>(std::move(alone));
}

EtcdAccess realEtcd() {
  static const auto clock = std::make_shared<MonotonicClock>();
  return {[](const EtcdOptions& o) -> std::unique_ptr<EtcdApi> {
            return std::make_unique<EtcdClient>(o);
          },
          clock};
}

EtcdWatch::EtcdWatch(const EtcdEndpoint& endpoint, const std::string& key, bool prefix,
                     int64_t from, HttpConnection::time_point deadline)
    : connection_(endpoint.host, endpoint.port, endpoint.tls) {
  json create{{"key", base64(key)}};
  if (prefix) create["range_end"] = base64(prefixEnd(key));
  if (from > 0) create["start_revision"] = std::to_string(from);
  create["prev_kv"] = true;  // a deletion says what the key was (EtcdEvent::prev)
  int status = 0;
  std::optional<std::string> first;
  try {
    status = connection_.openStream("/v3/watch", json{{"create_request", create}}.dump(), deadline);
    first = connection_.nextMessage(deadline);
  } catch (const Error& e) {
    throw NetworkError("etcd at " + endpoint.text() + " did not open a watch of '" + key +
                       "': " + e.what());
  }
  const json reply = first ? json::parse(*first, nullptr, false) : json();
  if (status != 200 || !reply.is_object() ||
      !reply.value("result", json::object()).value("created", false)) {
    throw NetworkError("etcd at " + endpoint.text() + " did not open a watch of '" + key + "'" +
                       (first ? ": " + first->substr(0, 200) : std::string()));
  }
}

std::vector<EtcdEvent> EtcdWatch::next(Clock::time_point deadline) {
  std::optional<std::string> message;
  try {
    message = connection_.nextMessage(deadline);
  } catch (const TimeoutError&) {
    return {};
  } catch (const NetworkError& e) {
    throw NetworkError("etcd at " + connection_.address() + " ended the watch: " + e.what());
  }
  if (!message) throw NetworkError("etcd at " + connection_.address() + " ended the watch");
  const json reply = json::parse(*message, nullptr, false);
  if (!reply.is_object() || !reply.contains("result")) {
    throw NetworkError("etcd at " + connection_.address() +
                       " ended the watch: " + message->substr(0, 200));
  }
  std::vector<EtcdEvent> events;
  for (const auto& e : reply["result"].value("events", json::array())) {
    events.push_back({e.value("type", "PUT") == "DELETE", keyValueOf(e.value("kv", json::object())),
                      keyValueOf(e.value("prev_kv", json::object()))});
  }
  etcdTraffic().events += events.size();
  return events;
}

}  // namespace accel::launcher
