#pragma once
// The c10d TCPStore wire protocol of torch 1.13 (what Debian's LibTorch and python3-torch
// speak), in one place: request parsing for the server, encoding for both sides.
//
// Every request is a 1-byte QueryType followed by its arguments; strings and byte vectors are
// a uint64 length (host byte order) and the bytes; integers are raw int64. Replies:
//   SET         key, value                 → (none)
//   COMPARE_SET key, expected, desired     → vector: the value now stored (see server)
//   GET         key                        → vector (clients WAIT for the key first)
//   ADD         key, int64 delta           → int64: the new value (stored as decimal text)
//   CHECK       uint64 n, n keys           → byte: READY (0) if all exist, else NOT_READY (1)
//   WAIT        uint64 n, n keys           → byte: STOP_WAITING (0) once all exist
//   GETNUMKEYS                             → int64
//   WATCH_KEY   key                        → byte KEY_CALLBACK_RESPONSE (3); later, per change:
//                                            byte event, key, old vector, new vector
//   DELETE_KEY  key                        → int64: keys deleted (0 or 1)
// Clients prefix user keys with "/" (the init counter "init/" is not prefixed). Each
// c10d::TCPStore object opens two connections; the second only carries WATCH_KEY.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accel::store::wire {

enum class QueryType : uint8_t {
  Set = 0,
  CompareSet = 1,
  Get = 2,
  Add = 3,
  Check = 4,
  Wait = 5,
  GetNumKeys = 6,
  WatchKey = 7,
  DeleteKey = 8,
};
inline constexpr uint8_t kMaxQueryType = 8;

enum class CheckResponse : uint8_t { Ready = 0, NotReady = 1 };
enum class WaitResponse : uint8_t { StopWaiting = 0 };
enum class WatchResponse : uint8_t { KeyUpdated = 0, KeyCreated = 1, KeyDeleted = 2, KeyCallbackResponse = 3 };

// A parsed request. Which fields are meaningful depends on `type` (see the table above).
struct Request {
  QueryType type = QueryType::Set;
  std::vector<std::string> keys;  // one key, or CHECK/WAIT's list
  std::string value;              // SET value, COMPARE_SET expected
  std::string desired;            // COMPARE_SET desired
  int64_t delta = 0;              // ADD
};

struct ParseLimits {
  uint64_t max_value_bytes = 64ull << 20;  // any single key or value
  uint64_t max_keys = 1u << 20;            // CHECK/WAIT list length
};

enum class ParseStatus { Complete, NeedMore, Invalid };

struct ParseResult {
  ParseStatus status = ParseStatus::NeedMore;
  size_t consumed = 0;  // bytes of `input` the request used (Complete only)
  std::string error;    // why the input is invalid (Invalid only)
};

// Parses one request from the front of `input`. Never reads past `input`, never allocates more
// than the limits allow, and never throws: Invalid for an unknown type or a length over the
// limits, NeedMore for a truncated frame.
ParseResult parseRequest(std::string_view input, const ParseLimits& limits, Request& out);

// Encoders, appending to `out`.
void putByte(std::string& out, uint8_t value);
void putInt64(std::string& out, int64_t value);
void putUint64(std::string& out, uint64_t value);
void putBytes(std::string& out, std::string_view bytes);  // length-prefixed

// Encodes a whole request (used by clients and tests).
std::string encodeRequest(const Request& request);

}  // namespace accel::store::wire
