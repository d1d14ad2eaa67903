#pragma once
// The c10d TCPStore wire protocol of every torch release from 1.13 on, in one place: which
// generations exist, how a connection's first bytes tell them apart, each generation's query
// codes and framing, request parsing for the server and encoding for both sides.
//
// Every request is a 1-byte query code followed by its arguments; strings and byte vectors are
// a uint64 length (little endian, the host order of every platform torch ships for) and the
// bytes; integers are raw int64/uint32. The generations, their codes and the torch releases
// that send each query are the table in wire_protocol.cc (generationTable()); in short:
//
//   Legacy     torch 1.13, 2.0   no handshake; SET=0 … GETNUMKEYS=6, WATCH_KEY=7, DELETE_KEY=8;
//                                a second connection per client carries WATCH_KEY callbacks
//   Torch21    torch 2.1         no handshake; WATCH_KEY gone: DELETE_KEY=7, APPEND=8,
//                                MULTI_GET=9, MULTI_SET=10, CANCEL_WAIT=11
//   Validated  torch 2.2 – 2.14  first query VALIDATE (0) + uint32 0x3C85F7CE, no reply; every
//                                code shifted up by one (SET=1 … CANCEL_WAIT=12), then PING=13
//                                (2.5+), QUEUE_PUSH/POP/LEN=14-16 (2.8+), LIST_KEYS=17 (2.10+),
//                                BARRIER=18 (2.12+)
// Legacy and Torch21 share codes 0-6 and cannot be told apart by their first bytes: such a
// connection is "unvalidated" until it sends a query that only one of them has
// (classifyUnvalidated()).
//
// Replies (same bytes in both generations where the query exists):
//   SET, APPEND, MULTI_SET, VALIDATE          → (none)
//   COMPARE_SET key, expected, desired        → vector: the value now stored (see the server)
//   GET key                                   → vector (clients WAIT for the key first)
//   ADD key, int64 delta                      → int64: the new value (stored as decimal text)
//   CHECK uint64 n, n keys                    → byte READY (0) if all exist, else NOT_READY (1)
//   WAIT uint64 n, n keys                     → byte STOP_WAITING (0) once all exist
//   CANCEL_WAIT                               → byte WAIT_CANCELED (1), after any STOP_WAITING
//   GETNUMKEYS                                → int64
//   DELETE_KEY key                            → int64: keys deleted (0 or 1)
//   MULTI_GET uint64 n, n keys                → n vectors, in order
//   MULTI_SET uint64 n, n × (key, value)      → (none)
//   PING uint32 nonce                         → uint32: the nonce
//   WATCH_KEY key (Legacy)                    → byte KEY_CALLBACK_RESPONSE (3); later, per
//                                               change: byte event, key, old vector, new vector
//   QUEUE_PUSH key, value                     → (none)
//   QUEUE_POP key                             → int64 n (the length before the pop), then, if
//                                               n > 0, the oldest value as a vector
//   QUEUE_LEN key                             → int64
//   LIST_KEYS                                 → int64 n, then n keys as vectors
//   BARRIER key, int64 world_size             → byte STOP_WAITING (0) once world_size arrived
// Clients prefix user keys with "/" (the init counter "init/" is not prefixed).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel::store::wire {

enum class Generation : uint8_t { Legacy, Torch21, Validated };

// What a query does, whatever its code in the client's generation.
enum class Op : uint8_t {
  Validate,
  Set,
  CompareSet,
  Get,
  Add,
  Check,
  Wait,
  GetNumKeys,
  WatchKey,
  DeleteKey,
  Append,
  MultiGet,
  MultiSet,
  CancelWait,
  Ping,
  QueuePush,
  QueuePop,
  QueueLen,
  ListKeys,
  Barrier,
};

// How a query's arguments are laid out after its code.
enum class Layout : uint8_t {
  None,          // GETNUMKEYS, CANCEL_WAIT, LIST_KEYS
  Key,           // GET, WATCH_KEY, DELETE_KEY, QUEUE_POP, QUEUE_LEN
  KeyValue,      // SET, APPEND, QUEUE_PUSH
  KeyTwoValues,  // COMPARE_SET: key, expected, desired
  KeyInt64,      // ADD, BARRIER
  KeyList,       // CHECK, WAIT, MULTI_GET: uint64 n, n keys
  KeyValueList,  // MULTI_SET: uint64 n, n × (key, value)
  Uint32,        // VALIDATE (magic), PING (nonce)
};

// One row of the protocol matrix: a query of one generation.
struct QuerySpec {
  Generation generation;
  uint8_t code;
  Op op;
  Layout layout;
  const char* name;   // torch's name for it
  const char* since;  // the first torch release whose client sends it
};

// Everything known about one generation.
struct GenerationSpec {
  Generation generation;
  const char* name;       // "torch 1.13–2.0 (legacy)"
  const char* releases;   // the torch releases whose clients speak it
  const char* handshake;  // what a client sends first
  const char* source;     // where in torch's source this was read, with the tags
};

inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;

enum class CheckResponse : uint8_t { Ready = 0, NotReady = 1 };
enum class WaitResponse : uint8_t { StopWaiting = 0, WaitCanceled = 1 };
enum class WatchResponse : uint8_t {
  KeyUpdated = 0,
  KeyCreated = 1,
  KeyDeleted = 2,
  KeyCallbackResponse = 3
};

// The matrix: every generation and every query of each, with its code.
const std::vector<GenerationSpec>& generations();
const std::vector<QuerySpec>& queryTable();
const GenerationSpec& generationSpec(Generation g);
// The query with `code` in generation `g`, or nullptr for a code that generation never sends.
const QuerySpec* findQuery(Generation g, uint8_t code);
// The code of `op` in generation `g`, or nullopt where that generation has no such query.
std::optional<uint8_t> codeOf(Generation g, Op op);
// Short name of a generation for messages ("legacy (torch 1.13–2.0)").
std::string describe(Generation g);

// A parsed request. Which fields are meaningful depends on `op` (see the table above).
struct Request {
  Op op = Op::Set;
  std::vector<std::string> keys;    // one key, or a list (CHECK, WAIT, MULTI_GET, MULTI_SET)
  std::vector<std::string> values;  // MULTI_SET's values, one per key
  std::string value;                // SET/APPEND/QUEUE_PUSH value, COMPARE_SET expected
  std::string desired;              // COMPARE_SET desired
  int64_t delta = 0;                // ADD delta, BARRIER world size
  uint32_t word = 0;                // VALIDATE magic, PING nonce
};

struct ParseLimits {
  uint64_t max_value_bytes = 64ull << 20;  // any single key or value
  uint64_t max_keys = 1u << 20;            // length of a key list
};

enum class ParseStatus { Complete, NeedMore, Invalid };

struct ParseResult {
  ParseStatus status = ParseStatus::NeedMore;
  size_t consumed = 0;  // bytes of `input` the request used (Complete only)
  std::string error;    // why the input is invalid (Invalid only)
};

// Tells a connection's generation from its first bytes: Validated when they are VALIDATE and
// the magic number; Legacy, not decisive, when they start a query of torch 1.13-2.1 (the
// connection is then "unvalidated": Legacy or Torch21). NeedMore while the bytes seen so far
// could still be VALIDATE; Invalid (with the reason) when they can be nothing known.
struct Detection {
  ParseStatus status = ParseStatus::NeedMore;
  Generation generation = Generation::Legacy;
  bool decisive = true;  // false: Legacy or Torch21, same meaning so far
  std::string error;
};
Detection detectGeneration(std::string_view firstBytes);

// For an unvalidated connection, which generation the query at the front of `pending` belongs
// to. Codes 0-6 mean the same in both (not decisive). 7 is 1.13's WATCH_KEY when it is the
// connection's first query (1.13 sends it only on its callback connection) and 2.1's
// DELETE_KEY otherwise. 8 is 1.13's DELETE_KEY when nothing follows its key (a 1.13 client waits
// for the reply) and 2.1's APPEND when bytes follow (its value). 9-11 are 2.1's.
Detection classifyUnvalidated(std::string_view pending, bool firstQuery);

// Parses a stream of requests that arrives in pieces, resuming where the last piece ended: each
// byte is examined once, whatever the pieces (a frame sent one byte at a time costs what it costs
// in one piece), and a key or value grows as its bytes arrive, so the caller need not keep the
// bytes of an unfinished request. Never reads past its input, never allocates ahead of the bytes
// received (a length prefix reserves nothing), never throws. Not thread-safe: one per connection.
class RequestParser {
 public:
  explicit RequestParser(const ParseLimits& limits = {}) : limits_(limits) {}

  // Consumes bytes of generation `g`'s requests from the front of `input`:
  //  Complete  `consumed` bytes finished a request, now in request() (until the next feed).
  //  NeedMore  `consumed` bytes (all of `input` but at most 7 bytes of a split length or
  //            integer, which the caller passes again with what follows) were taken in.
  //  Invalid   a code `g` lacks or a length over the limits (`error` says which); the stream
  //            is unusable (reset() before any reuse).
  // `g` is read at a request's first byte; later pieces of that request ignore it.
  ParseResult feed(Generation g, std::string_view input);

  const Request& request() const { return request_; }
  Request& request() { return request_; }
  // True once a request's first byte was consumed and until it is complete.
  bool midRequest() const { return spec_ != nullptr; }
  // What the unfinished request holds: its bytes so far plus kStringOverhead per key or value.
  uint64_t heldBytes() const { return held_; }
  // Every byte consumed since construction (each byte is examined once: this is the work done).
  uint64_t bytesExamined() const { return examined_; }
  void reset();

  // The bookkeeping of one decoded key or value (a std::string), counted in heldBytes().
  static constexpr uint64_t kStringOverhead = sizeof(std::string);

 private:
  enum class Field : uint8_t { Key, Value, Desired, Int64, Uint32, Count, ListKey, ListValue, End };
  Field nextField() const;
  bool start(Generation g, uint8_t code, ParseResult& result);
  // Reads field `f` from input at `pos`: false when it needs more bytes or is invalid.
  bool readField(Field f, std::string_view input, size_t& pos, ParseResult& result);
  bool beginString(Field f, std::string_view input, size_t& pos, ParseResult& result);
  bool continueString(std::string_view input, size_t& pos);
  std::string& stringField();  // the key or value `string_field_` names
  ParseResult finish(ParseStatus status, size_t consumed, ParseResult result);

  ParseLimits limits_;
  Request request_;
  const QuerySpec* spec_ = nullptr;  // the request under way, if any
  size_t field_ = 0;                 // fields of it read so far
  uint64_t count_ = 0;               // a list's length, once read
  bool in_string_ = false;           // a key or value is being filled
  Field string_field_ = Field::End;  // which (a list's is its last element)
  uint64_t string_left_ = 0;         // its bytes still to come
  uint64_t held_ = 0;
  uint64_t examined_ = 0;
};

// Parses one request of generation `g` from the front of a buffer holding it whole (a
// RequestParser fed once): Complete with `consumed`, NeedMore (consumed 0) for a truncated
// frame, Invalid for a code the generation does not have or a length over the limits. Never
// reads past `input`, never allocates more than the limits allow, never throws.
ParseResult parseRequest(Generation g, std::string_view input, const ParseLimits& limits,
                         Request& out);

// Encoders, appending to `out`.
void putByte(std::string& out, uint8_t value);
void putUint32(std::string& out, uint32_t value);
void putInt64(std::string& out, int64_t value);
void putUint64(std::string& out, uint64_t value);
void putBytes(std::string& out, std::string_view bytes);  // length-prefixed

// Encodes a whole request in generation `g` (used by clients and tests). Throws
// std::invalid_argument when `g` has no such query (e.g. MULTI_GET in Legacy).
std::string encodeRequest(Generation g, const Request& request);

// Up to `max` bytes as hex ("00 ce f7 85 3c …"), for log lines about bad input.
std::string hexBytes(std::string_view bytes, size_t max = 16);

}  // namespace accel::store::wire
