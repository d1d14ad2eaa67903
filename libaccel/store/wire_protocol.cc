#include "libaccel/store/wire_protocol.h"

#include <cstring>

namespace accel::store::wire {
namespace {

// A cursor over the input that reports truncation instead of reading past the end.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool u8(uint8_t& v) {
    if (left() < 1) return false;
    v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool u64(uint64_t& v) {
    if (left() < sizeof v) return false;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool i64(int64_t& v) {
    uint64_t u;
    if (!u64(u)) return false;
    std::memcpy(&v, &u, sizeof v);
    return true;
  }
  // Reads a length-prefixed byte string; sets tooLong instead when the length exceeds `max`.
  bool bytes(std::string& v, uint64_t max, bool& tooLong) {
    uint64_t n;
    size_t start = pos_;
    if (!u64(n)) return false;
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

}  // namespace

ParseResult parseRequest(std::string_view input, const ParseLimits& limits, Request& out) {
  Reader r(input);
  ParseResult result;
  uint8_t type;
  if (!r.u8(type)) return result;
  if (type > kMaxQueryType) {
    result.status = ParseStatus::Invalid;
    result.error = "unknown query type " + std::to_string(type);
    return result;
  }
  out = Request{};
  out.type = static_cast<QueryType>(type);
  bool tooLong = false;
  auto invalidIfTooLong = [&](ParseResult& res) {
    if (tooLong) {
      res.status = ParseStatus::Invalid;
      res.error = "a key or value is longer than the limit of " + std::to_string(limits.max_value_bytes) + " bytes";
    }
    return res;
  };
  auto key = [&]() {
    out.keys.emplace_back();
    return r.bytes(out.keys.back(), limits.max_value_bytes, tooLong);
  };

  switch (out.type) {
    case QueryType::Set:
      if (!key() || !r.bytes(out.value, limits.max_value_bytes, tooLong)) return invalidIfTooLong(result);
      break;
    case QueryType::CompareSet:
      if (!key() || !r.bytes(out.value, limits.max_value_bytes, tooLong) ||
          !r.bytes(out.desired, limits.max_value_bytes, tooLong)) {
        return invalidIfTooLong(result);
      }
      break;
    case QueryType::Get:
    case QueryType::WatchKey:
    case QueryType::DeleteKey:
      if (!key()) return invalidIfTooLong(result);
      break;
    case QueryType::Add:
      if (!key() || !r.i64(out.delta)) return invalidIfTooLong(result);
      break;
    case QueryType::Check:
    case QueryType::Wait: {
      uint64_t n;
      if (!r.u64(n)) return result;
      if (n > limits.max_keys) {
        result.status = ParseStatus::Invalid;
        result.error = "a list of " + std::to_string(n) + " keys is longer than the limit of " +
                       std::to_string(limits.max_keys);
        return result;
      }
      for (uint64_t i = 0; i < n; ++i) {
        if (!key()) return invalidIfTooLong(result);
      }
      break;
    }
    case QueryType::GetNumKeys:
      break;
  }
  result.status = ParseStatus::Complete;
  result.consumed = r.pos();
  return result;
}

void putByte(std::string& out, uint8_t value) { out.push_back(static_cast<char>(value)); }

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

std::string encodeRequest(const Request& q) {
  std::string out;
  putByte(out, static_cast<uint8_t>(q.type));
  switch (q.type) {
    case QueryType::Set:
      putBytes(out, q.keys.at(0));
      putBytes(out, q.value);
      break;
    case QueryType::CompareSet:
      putBytes(out, q.keys.at(0));
      putBytes(out, q.value);
      putBytes(out, q.desired);
      break;
    case QueryType::Get:
    case QueryType::WatchKey:
    case QueryType::DeleteKey:
      putBytes(out, q.keys.at(0));
      break;
    case QueryType::Add:
      putBytes(out, q.keys.at(0));
      putInt64(out, q.delta);
      break;
    case QueryType::Check:
    case QueryType::Wait:
      putUint64(out, q.keys.size());
      for (const auto& k : q.keys) putBytes(out, k);
      break;
    case QueryType::GetNumKeys:
      break;
  }
  return out;
}

}  // namespace accel::store::wire
