#include "libaccel/store/wire_protocol.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace accel::store::wire {
namespace {

constexpr Generation L = Generation::Legacy;
constexpr Generation T = Generation::Torch21;
constexpr Generation V = Generation::Validated;

// The protocol matrix, read from torch's own source (see kGenerations for the files and tags;
// tests/store/wire_transcripts_test.cc replays the bytes each release's client sends). torch
// only ever appended to its QueryType enum, except twice: 2.1 removed WATCH_KEY (shifting
// DELETE_KEY down) and 2.2 inserted VALIDATE at 0 (shifting everything up).
const std::vector<QuerySpec> kQueries = {
    // Legacy: torch 1.13 and 2.0 (TCPStore.cpp's QueryType; no handshake).
    {L, 0, Op::Set, Layout::KeyValue, "SET", "1.13"},
    {L, 1, Op::CompareSet, Layout::KeyTwoValues, "COMPARE_SET", "1.13"},
    {L, 2, Op::Get, Layout::Key, "GET", "1.13"},
    {L, 3, Op::Add, Layout::KeyInt64, "ADD", "1.13"},
    {L, 4, Op::Check, Layout::KeyList, "CHECK", "1.13"},
    {L, 5, Op::Wait, Layout::KeyList, "WAIT", "1.13"},
    {L, 6, Op::GetNumKeys, Layout::None, "GETNUMKEYS", "1.13"},
    {L, 7, Op::WatchKey, Layout::Key, "WATCH_KEY", "1.13"},
    {L, 8, Op::DeleteKey, Layout::Key, "DELETE_KEY", "1.13"},
    // Torch21: torch 2.1 (TCPStoreBackend.hpp; WATCH_KEY gone, extended API, no handshake).
    {T, 0, Op::Set, Layout::KeyValue, "SET", "2.1"},
    {T, 1, Op::CompareSet, Layout::KeyTwoValues, "COMPARE_SET", "2.1"},
    {T, 2, Op::Get, Layout::Key, "GET", "2.1"},
    {T, 3, Op::Add, Layout::KeyInt64, "ADD", "2.1"},
    {T, 4, Op::Check, Layout::KeyList, "CHECK", "2.1"},
    {T, 5, Op::Wait, Layout::KeyList, "WAIT", "2.1"},
    {T, 6, Op::GetNumKeys, Layout::None, "GETNUMKEYS", "2.1"},
    {T, 7, Op::DeleteKey, Layout::Key, "DELETE_KEY", "2.1"},
    {T, 8, Op::Append, Layout::KeyValue, "APPEND", "2.1"},
    {T, 9, Op::MultiGet, Layout::KeyList, "MULTI_GET", "2.1"},
    {T, 10, Op::MultiSet, Layout::KeyValueList, "MULTI_SET", "2.1"},
    {T, 11, Op::CancelWait, Layout::None, "CANCEL_WAIT", "2.1"},
    // Validated: torch 2.2 on (VALIDATE inserted at 0). New queries are appended, so one table
    // serves every release; `since` says which client first sends each.
    {V, 0, Op::Validate, Layout::Uint32, "VALIDATE", "2.2"},
    {V, 1, Op::Set, Layout::KeyValue, "SET", "2.2"},
    {V, 2, Op::CompareSet, Layout::KeyTwoValues, "COMPARE_SET", "2.2"},
    {V, 3, Op::Get, Layout::Key, "GET", "2.2"},
    {V, 4, Op::Add, Layout::KeyInt64, "ADD", "2.2"},
    {V, 5, Op::Check, Layout::KeyList, "CHECK", "2.2"},
    {V, 6, Op::Wait, Layout::KeyList, "WAIT", "2.2"},
    {V, 7, Op::GetNumKeys, Layout::None, "GETNUMKEYS", "2.2"},
    {V, 8, Op::DeleteKey, Layout::Key, "DELETE_KEY", "2.2"},
    {V, 9, Op::Append, Layout::KeyValue, "APPEND", "2.2"},
    {V, 10, Op::MultiGet, Layout::KeyList, "MULTI_GET", "2.2"},
    {V, 11, Op::MultiSet, Layout::KeyValueList, "MULTI_SET", "2.2"},
    {V, 12, Op::CancelWait, Layout::None, "CANCEL_WAIT", "2.2"},
    {V, 13, Op::Ping, Layout::Uint32, "PING", "2.5"},
    {V, 14, Op::QueuePush, Layout::KeyValue, "QUEUE_PUSH", "2.8"},
    {V, 15, Op::QueuePop, Layout::Key, "QUEUE_POP", "2.8"},
    {V, 16, Op::QueueLen, Layout::Key, "QUEUE_LEN", "2.8"},
    {V, 17, Op::ListKeys, Layout::None, "LIST_KEYS", "2.10"},
    {V, 18, Op::Barrier, Layout::KeyInt64, "BARRIER", "2.12"},
};

const std::vector<GenerationSpec> kGenerations = {
    {L, "legacy", "1.13, 2.0",
     "none: the first bytes are a query (usually ADD \"init/\" 1); each client opens a second "
     "connection that only ever sends WATCH_KEY",
     "TCPStore.cpp at v1.13.1 (Debian's source) and its QueryType, unchanged in v2.0"},
    {T, "torch 2.1", "2.1",
     "none, as legacy; codes 0-6 are legacy's, 7 is DELETE_KEY (WATCH_KEY is gone) and 8-11 new",
     "TCPStoreBackend.hpp at pytorch@3a67b827 (2.1 branch: #105014 removed WATCH_KEY before the "
     "cut)"},
    {V, "validated", "2.2 - 2.14",
     "VALIDATE (0) + uint32 0x3C85F7CE, no reply; from 2.5 then PING (13) + uint32 pid, answered "
     "with the same uint32",
     "TCPStoreBackend.hpp at pytorch@0278b218 (2.2), v2.6.0 (Debian's source), v2.8.0-rc4, "
     "v2.14.1 (Debian's binaries); TCPStore.cpp and TCPStoreLibUvBackend.cpp alongside"},
};

// A cursor over the input that reports truncation instead of reading past the end.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool u8(uint8_t& v) {
    if (left() < 1) return false;
    v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  template <typename T>
  bool raw(T& v) {
    if (left() < sizeof v) return false;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  // Reads a length-prefixed byte string; sets tooLong instead when the length exceeds `max`.
  bool bytes(std::string& v, uint64_t max, bool& tooLong) {
    uint64_t n;
    size_t start = pos_;
    if (!raw(n)) return false;
    if (n > max) {
      tooLong = true;
      return false;
    }
    if (left() < n) {
      pos_ = start;
      return false;
    }
    v.assign(in_.data() + pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  size_t left() const { return in_.size() - pos_; }
  std::string_view in_;
  size_t pos_ = 0;
};

// Reads a fixed-width little-endian integer at `pos`; false (nothing read) when fewer bytes remain.
template <typename T>
bool takeRaw(std::string_view in, size_t& pos, T& v) {
  if (in.size() - pos < sizeof v) return false;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

}  // namespace

const std::vector<GenerationSpec>& generations() { return kGenerations; }
const std::vector<QuerySpec>& queryTable() { return kQueries; }

const GenerationSpec& generationSpec(Generation g) {
  for (const auto& s : kGenerations) {
    if (s.generation == g) return s;
  }
  return kGenerations.front();
}

const QuerySpec* findQuery(Generation g, uint8_t code) {
  for (const auto& q : kQueries) {
    if (q.generation == g && q.code == code) return &q;
  }
  return nullptr;
}

std::optional<uint8_t> codeOf(Generation g, Op op) {
  for (const auto& q : kQueries) {
    if (q.generation == g && q.op == op) return q.code;
  }
  return std::nullopt;
}

std::string describe(Generation g) {
  const GenerationSpec& s = generationSpec(g);
  return std::string(s.name) + " (torch " + s.releases + ")";
}

Detection detectGeneration(std::string_view first) {
  Detection d;
  if (first.empty()) return d;
  const auto code = static_cast<uint8_t>(first[0]);
  std::string magic;
  putUint32(magic, kValidationMagic);
  if (code == 0) {
    // VALIDATE and the unvalidated SET share code 0: the magic decides. A SET would need a key
    // of 1 GB (its length's low bytes being the magic) to look validated: over every limit.
    const size_t have = std::min(first.size() - 1, magic.size());
    if (first.substr(1, have) == std::string_view(magic).substr(0, have)) {
      if (have < magic.size()) return d;  // NeedMore
      d.status = ParseStatus::Complete;
      d.generation = Generation::Validated;
      return d;
    }
  }
  if (findQuery(Generation::Legacy, code) || findQuery(Generation::Torch21, code)) {
    d.status = ParseStatus::Complete;
    d.generation = Generation::Legacy;  // or Torch21: see classifyUnvalidated()
    d.decisive = false;
    return d;
  }
  d.status = ParseStatus::Invalid;
  d.error = "first query code " + std::to_string(code) +
            " is neither torch 2.2+'s VALIDATE nor a torch 1.13-2.1 query; not a TCPStore client";
  return d;
}

Detection classifyUnvalidated(std::string_view pending, bool firstQuery) {
  Detection d;
  if (pending.empty()) return d;
  const auto code = static_cast<uint8_t>(pending[0]);
  d.status = ParseStatus::Complete;
  if (code <= 6) {  // the same query in both
    d.decisive = false;
    return d;
  }
  if (code == 7) {
    // 1.13's WATCH_KEY only ever opens its own callback connection; 2.1's DELETE_KEY comes
    // on a connection that has already said something (its ADD "init/" at least).
    d.generation = firstQuery ? Generation::Legacy : Generation::Torch21;
    return d;
  }
  if (code == 8) {
    // 1.13's DELETE_KEY (key) waits for its reply, so nothing follows the key; 2.1's APPEND
    // (key, value) sends the value with the key, in the same write.
    Reader r(pending.substr(1));
    std::string key;
    bool tooLong = false;
    if (!r.bytes(key, ParseLimits{}.max_value_bytes, tooLong)) {
      if (!tooLong) d.status = ParseStatus::NeedMore;  // too long: parseRequest says so
      return d;
    }
    d.generation = pending.size() > 1 + r.pos() ? Generation::Torch21 : Generation::Legacy;
    return d;
  }
  if (findQuery(Generation::Torch21, code)) {
    d.generation = Generation::Torch21;
    return d;
  }
  d.status = ParseStatus::Invalid;
  d.error = "unknown query code " + std::to_string(code) +
            " for a connection without VALIDATE (torch 1.13-2.1)";
  return d;
}

void RequestParser::reset() {
  request_ = Request{};
  spec_ = nullptr;
  field_ = 0;
  count_ = 0;
  in_string_ = false;
  string_left_ = 0;
  held_ = 0;
}

ParseResult RequestParser::feed(Generation g, std::string_view input) {
  ParseResult result;
  size_t pos = 0;
  if (!spec_) {
    if (input.empty()) return result;
    if (!start(g, static_cast<uint8_t>(input[0]), result))
      return finish(ParseStatus::Invalid, 1, std::move(result));
    pos = 1;
  }
  while (true) {
    if (in_string_ && !continueString(input, pos))
      return finish(ParseStatus::NeedMore, pos, std::move(result));
    const Field f = nextField();
    if (f == Field::End) return finish(ParseStatus::Complete, pos, std::move(result));
    if (!readField(f, input, pos, result)) {
      const ParseStatus status =
          result.error.empty() ? ParseStatus::NeedMore : ParseStatus::Invalid;
      return finish(status, pos, std::move(result));
    }
  }
}

bool RequestParser::start(Generation g, uint8_t code, ParseResult& result) {
  const QuerySpec* spec = findQuery(g, code);
  if (!spec) {
    result.error =
        "unknown query code " + std::to_string(code) + " for the " + describe(g) + " protocol";
    return false;
  }
  reset();
  spec_ = spec;
  request_.op = spec->op;
  return true;
}

ParseResult RequestParser::finish(ParseStatus status, size_t consumed, ParseResult result) {
  result.status = status;
  result.consumed = consumed;
  examined_ += consumed;
  held_ += consumed;
  if (status == ParseStatus::Complete) {
    spec_ = nullptr;
    held_ = 0;
  }
  return result;
}

// The next field of the request under way, from its layout and what was read of it so far.
RequestParser::Field RequestParser::nextField() const {
  static constexpr Field kKeyValue[] = {Field::Key, Field::Value};
  static constexpr Field kKeyTwoValues[] = {Field::Key, Field::Value, Field::Desired};
  static constexpr Field kKeyInt64[] = {Field::Key, Field::Int64};
  switch (spec_->layout) {
    case Layout::None:
      return Field::End;
    case Layout::Key:
      return field_ < 1 ? Field::Key : Field::End;
    case Layout::KeyValue:
      return field_ < 2 ? kKeyValue[field_] : Field::End;
    case Layout::KeyTwoValues:
      return field_ < 3 ? kKeyTwoValues[field_] : Field::End;
    case Layout::KeyInt64:
      return field_ < 2 ? kKeyInt64[field_] : Field::End;
    case Layout::Uint32:
      return field_ < 1 ? Field::Uint32 : Field::End;
    case Layout::KeyList:
      if (field_ == 0) return Field::Count;
      return request_.keys.size() < count_ ? Field::ListKey : Field::End;
    case Layout::KeyValueList:
      if (field_ == 0) return Field::Count;
      if (request_.values.size() < request_.keys.size()) return Field::ListValue;
      return request_.keys.size() < count_ ? Field::ListKey : Field::End;
  }
  return Field::End;
}

bool RequestParser::readField(Field f, std::string_view input, size_t& pos, ParseResult& result) {
  switch (f) {
    case Field::Int64:
      if (!takeRaw(input, pos, request_.delta)) return false;
      break;
    case Field::Uint32:
      if (!takeRaw(input, pos, request_.word)) return false;
      break;
    case Field::Count:
      if (!takeRaw(input, pos, count_)) return false;
      if (count_ > limits_.max_keys) {
        result.error = std::string(spec_->name) + ": a list of " + std::to_string(count_) +
                       " keys is longer than the limit of " + std::to_string(limits_.max_keys);
        return false;
      }
      break;
    default:
      return beginString(f, input, pos, result);
  }
  ++field_;
  return true;
}

// Reads a key's or value's length and sets it up to be filled; its bytes follow (continueString).
bool RequestParser::beginString(Field f, std::string_view input, size_t& pos, ParseResult& result) {
  uint64_t n;
  if (!takeRaw(input, pos, n)) return false;
  if (n > limits_.max_value_bytes) {
    result.error = std::string(spec_->name) + ": a key or value is longer than the limit of " +
                   std::to_string(limits_.max_value_bytes) + " bytes";
    return false;
  }
  if (f == Field::ListKey || f == Field::Key) request_.keys.emplace_back();
  if (f == Field::ListValue) request_.values.emplace_back();
  in_string_ = true;
  string_field_ = f;
  string_left_ = n;
  held_ += kStringOverhead;
  ++field_;
  return true;
}

// Appends what `input` holds of the string being filled. True once it is whole.
bool RequestParser::continueString(std::string_view input, size_t& pos) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(string_left_, input.size() - pos));
  stringField().append(input.data() + pos, n);
  pos += n;
  string_left_ -= n;
  if (string_left_ > 0) return false;
  in_string_ = false;
  return true;
}

std::string& RequestParser::stringField() {
  switch (string_field_) {
    case Field::Value:
      return request_.value;
    case Field::Desired:
      return request_.desired;
    case Field::ListValue:
      return request_.values.back();
    default:
      return request_.keys.back();
  }
}

ParseResult parseRequest(Generation g, std::string_view input, const ParseLimits& limits,
                         Request& out) {
  RequestParser parser(limits);
  ParseResult result = parser.feed(g, input);
  if (result.status == ParseStatus::Complete) out = std::move(parser.request());
  if (result.status == ParseStatus::NeedMore) result.consumed = 0;
  return result;
}

void putByte(std::string& out, uint8_t value) { out.push_back(static_cast<char>(value)); }

void putUint32(std::string& out, uint32_t value) {
  char buf[sizeof value];
  std::memcpy(buf, &value, sizeof value);
  out.append(buf, sizeof buf);
}

void putUint64(std::string& out, uint64_t value) {
  char buf[sizeof value];
  std::memcpy(buf, &value, sizeof value);
  out.append(buf, sizeof buf);
}

void putInt64(std::string& out, int64_t value) {
  uint64_t u;
  std::memcpy(&u, &value, sizeof u);
  putUint64(out, u);
}

void putBytes(std::string& out, std::string_view bytes) {
  putUint64(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

std::string encodeRequest(Generation g, const Request& q) {
  const auto code = codeOf(g, q.op);
  if (!code) throw std::invalid_argument("the " + describe(g) + " protocol has no such query");
  const QuerySpec* spec = findQuery(g, *code);
  std::string out;
  putByte(out, *code);
  switch (spec->layout) {
    case Layout::None:
      break;
    case Layout::Key:
      putBytes(out, q.keys.at(0));
      break;
    case Layout::KeyValue:
      putBytes(out, q.keys.at(0));
      putBytes(out, q.value);
      break;
    case Layout::KeyTwoValues:
      putBytes(out, q.keys.at(0));
      putBytes(out, q.value);
      putBytes(out, q.desired);
      break;
    case Layout::KeyInt64:
      putBytes(out, q.keys.at(0));
      putInt64(out, q.delta);
      break;
    case Layout::KeyList:
      putUint64(out, q.keys.size());
      for (const auto& k : q.keys) putBytes(out, k);
      break;
    case Layout::KeyValueList:
      putUint64(out, q.keys.size());
      for (size_t i = 0; i < q.keys.size(); ++i) {
        putBytes(out, q.keys[i]);
        putBytes(out, q.values.at(i));
      }
      break;
    case Layout::Uint32:
      putUint32(out, q.word);
      break;
  }
  return out;
}

std::string hexBytes(std::string_view bytes, size_t max) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    if (i) out += ' ';
    const auto b = static_cast<uint8_t>(bytes[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  if (bytes.size() > max) out += " … (" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

}  // namespace accel::store::wire
