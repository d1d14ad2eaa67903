#include "libaccel/store/wire_protocol.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

namespace accel::store::wire {
namespace {

constexpr Generation kLegacy = Generation::Legacy;
constexpr Generation kTorch21 = Generation::Torch21;
constexpr Generation kValidated = Generation::Validated;

Request request(Op op, std::vector<std::string> keys, std::string value = "",
                std::string desired = "", int64_t delta = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.value = std::move(value);
  r.desired = std::move(desired);
  r.delta = delta;
  return r;
}

// One sample of every query each generation has.
std::vector<Request> samples(Generation g) {
  std::vector<Request> all = {request(Op::Set, {"/k"}, std::string("v\0w", 3)),
                              request(Op::CompareSet, {"/k"}, "old", "new"),
                              request(Op::Get, {"/k"}),
                              request(Op::Add, {"init/"}, "", "", -5),
                              request(Op::Check, {"/a", "/b"}),
                              request(Op::Wait, {"/a", "", "/c"}),
                              request(Op::GetNumKeys, {}),
                              request(Op::WatchKey, {"/w"}),
                              request(Op::DeleteKey, {"/k"}),
                              request(Op::Append, {"/log"}, "more"),
                              request(Op::MultiGet, {"/a", "/b", "/c"}),
                              request(Op::CancelWait, {}),
                              request(Op::QueuePush, {"/q"}, "item"),
                              request(Op::QueuePop, {"/q"}),
                              request(Op::QueueLen, {"/q"})};
  Request multiSet = request(Op::MultiSet, {"/x", "/y"});
  multiSet.values = {"1", std::string("\0", 1)};
  all.push_back(multiSet);
  Request validate = request(Op::Validate, {});
  validate.word = kValidationMagic;
  all.push_back(validate);
  Request ping = request(Op::Ping, {});
  ping.word = 0xdeadbeef;
  all.push_back(ping);
  std::vector<Request> out;
  for (auto& r : all) {
    if (codeOf(g, r.op)) out.push_back(r);
  }
  return out;
}

class EveryGeneration : public ::testing::TestWithParam<Generation> {};

TEST_P(EveryGeneration, RoundTripsEveryQuery) {
  const Generation g = GetParam();
  for (const auto& q : samples(g)) {
    std::string bytes = encodeRequest(g, q) + "trailing";
    Request out;
    auto r = parseRequest(g, bytes, {}, out);
    ASSERT_EQ(r.status, ParseStatus::Complete) << static_cast<int>(q.op);
    EXPECT_EQ(r.consumed, bytes.size() - 8);
    EXPECT_EQ(out.op, q.op);
    EXPECT_EQ(out.keys, q.keys);
    EXPECT_EQ(out.values, q.values);
    EXPECT_EQ(out.value, q.value);
    EXPECT_EQ(out.desired, q.desired);
    EXPECT_EQ(out.delta, q.delta);
    EXPECT_EQ(out.word, q.word);
  }
}

TEST_P(EveryGeneration, EveryTruncationNeedsMore) {
  const Generation g = GetParam();
  for (const auto& q : samples(g)) {
    std::string bytes = encodeRequest(g, q);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      Request out;
      auto r = parseRequest(g, std::string_view(bytes.data(), cut), {}, out);
      EXPECT_EQ(r.status, ParseStatus::NeedMore)
          << "op " << static_cast<int>(q.op) << " cut at " << cut;
    }
  }
}

// The stream of every query of a generation, fed to one RequestParser in pieces of every size
// from one byte: the same requests as in one piece, each byte examined once, and nothing held
// between requests.
TEST_P(EveryGeneration, AResumingParserSeesThePiecesAsOneStream) {
  const Generation g = GetParam();
  std::string stream;
  for (const auto& q : samples(g)) stream += encodeRequest(g, q);
  for (size_t piece = 1; piece <= 17; ++piece) {
    RequestParser parser;
    std::string pending;  // what the caller keeps: at most a split length or integer
    std::vector<Request> got;
    uint64_t maxPending = 0;
    for (size_t at = 0; at < stream.size(); at += piece) {
      pending += stream.substr(at, piece);
      while (true) {
        ParseResult r = parser.feed(g, pending);
        ASSERT_NE(r.status, ParseStatus::Invalid) << r.error;
        pending.erase(0, r.consumed);
        if (r.status == ParseStatus::NeedMore) break;
        got.push_back(parser.request());
        EXPECT_EQ(parser.heldBytes(), 0u);
      }
      maxPending = std::max<uint64_t>(maxPending, pending.size());
    }
    EXPECT_TRUE(pending.empty());
    EXPECT_FALSE(parser.midRequest());
    EXPECT_LT(maxPending, 8u) << "piece " << piece;  // at most a split length or integer
    EXPECT_EQ(parser.bytesExamined(), stream.size()) << "piece " << piece;
    const auto want = samples(g);
    ASSERT_EQ(got.size(), want.size()) << "piece " << piece;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(encodeRequest(g, got[i]), encodeRequest(g, want[i]))
          << "piece " << piece << ", request " << i;
    }
  }
}

// A value under way is held as it arrives, never reserved from its claimed length.
TEST(RequestParserTest, HoldsWhatArrivedNotWhatALengthClaims) {
  RequestParser parser;
  std::string head;
  putByte(head, *codeOf(kLegacy, Op::Set));
  putBytes(head, "/k");
  putUint64(head, 60ull << 20);    // a 60 MiB value is announced
  head += std::string(1000, 'v');  // 1000 bytes of it arrive
  ParseResult r = parser.feed(kLegacy, head);
  EXPECT_EQ(r.status, ParseStatus::NeedMore);
  EXPECT_EQ(r.consumed, head.size());
  EXPECT_TRUE(parser.midRequest());
  EXPECT_EQ(parser.heldBytes(), head.size() + 2 * RequestParser::kStringOverhead);
  EXPECT_LT(parser.request().value.capacity(), 1u << 20);
}

TEST_P(EveryGeneration, AbsurdLengthsAreInvalidBeforeAnyAllocation) {
  const Generation g = GetParam();
  ParseLimits limits;
  limits.max_value_bytes = 1024;
  limits.max_keys = 10;
  Request out;
  std::string huge;
  putByte(huge, *codeOf(g, Op::Get));
  putUint64(huge, 1ull << 62);  // a GET whose key claims 4 EiB
  auto r = parseRequest(g, huge, limits, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "GET: a key or value is longer than the limit of 1024 bytes");
  std::string many;
  putByte(many, *codeOf(g, Op::Wait));
  putUint64(many, 11);
  r = parseRequest(g, many, limits, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "WAIT: a list of 11 keys is longer than the limit of 10");
}

INSTANTIATE_TEST_SUITE_P(WireProtocol, EveryGeneration,
                         ::testing::Values(kLegacy, kTorch21, kValidated), [](const auto& info) {
                           return info.param == kLegacy    ? "Legacy"
                                  : info.param == kTorch21 ? "Torch21"
                                                           : "Validated";
                         });

TEST(WireProtocolTest, UnvalidatedConnectionsAreToldApartByTheirFirstDistinctQuery) {
  auto classify = [](Generation g, const Request& q, bool first, std::string extra = "") {
    return classifyUnvalidated(encodeRequest(g, q) + extra, first);
  };
  // 0-6: the same query in 1.13 and 2.1.
  auto d = classify(kLegacy, request(Op::Add, {"init/"}, "", "", 1), true);
  EXPECT_EQ(d.status, ParseStatus::Complete);
  EXPECT_FALSE(d.decisive);
  // 7: 1.13's WATCH_KEY opens its callback connection; 2.1's DELETE_KEY follows other queries.
  EXPECT_EQ(classify(kLegacy, request(Op::WatchKey, {"/k"}), true).generation, kLegacy);
  EXPECT_EQ(classify(kTorch21, request(Op::DeleteKey, {"/k"}), false).generation, kTorch21);
  // 8: 1.13's DELETE_KEY has nothing after its key; 2.1's APPEND carries a value.
  d = classify(kLegacy, request(Op::DeleteKey, {"/k"}), false);
  EXPECT_TRUE(d.decisive);
  EXPECT_EQ(d.generation, kLegacy);
  EXPECT_EQ(classify(kTorch21, request(Op::Append, {"/k"}, "v"), false).generation, kTorch21);
  std::string keyOnly = encodeRequest(kLegacy, request(Op::DeleteKey, {"/k"}));
  EXPECT_EQ(classifyUnvalidated(keyOnly.substr(0, 5), false).status, ParseStatus::NeedMore);
  // 9-11 exist only in 2.1; 12 in neither.
  EXPECT_EQ(classify(kTorch21, request(Op::CancelWait, {}), false).generation, kTorch21);
  EXPECT_EQ(classifyUnvalidated("\x0c", false).status, ParseStatus::Invalid);
}

TEST(WireProtocolTest, TheMatrixHasOneCodePerQueryAndNoGaps) {
  for (Generation g : {kLegacy, kTorch21, kValidated}) {
    std::set<uint8_t> codes;
    std::set<Op> ops;
    for (const auto& q : queryTable()) {
      if (q.generation != g) continue;
      EXPECT_TRUE(codes.insert(q.code).second)
          << describe(g) << " code " << int(q.code) << " twice";
      EXPECT_TRUE(ops.insert(q.op).second) << describe(g) << " " << q.name << " twice";
    }
    ASSERT_FALSE(codes.empty());
    EXPECT_EQ(*codes.rbegin() + 1u, codes.size()) << "torch numbers its queries densely from 0";
  }
  // torch 2.x shifted every 1.13 code by one when VALIDATE took 0, and dropped WATCH_KEY.
  EXPECT_EQ(codeOf(kLegacy, Op::Set), 0);
  EXPECT_EQ(codeOf(kValidated, Op::Set), 1);
  EXPECT_EQ(codeOf(kLegacy, Op::DeleteKey), 8);
  EXPECT_EQ(codeOf(kValidated, Op::DeleteKey), 8);
  EXPECT_FALSE(codeOf(kValidated, Op::WatchKey));
  EXPECT_FALSE(codeOf(kLegacy, Op::MultiGet));
  EXPECT_EQ(codeOf(kTorch21, Op::DeleteKey), 7);  // 2.1 dropped WATCH_KEY before adding VALIDATE
  EXPECT_EQ(codeOf(kValidated, Op::Barrier), 18);
}

TEST(WireProtocolTest, BytesMatchTorch113Client) {
  // As captured from python3-torch 1.13: ADD "init/" 1 and SET "/key" "val".
  EXPECT_EQ(encodeRequest(kLegacy, request(Op::Add, {"init/"}, "", "", 1)),
            std::string("\x03\x05\0\0\0\0\0\0\0init/\x01\0\0\0\0\0\0\0", 22));
  EXPECT_EQ(encodeRequest(kLegacy, request(Op::Set, {"/key"}, "val")),
            std::string("\x00\x04\0\0\0\0\0\0\0/key\x03\0\0\0\0\0\0\0val", 24));
}

TEST(WireProtocolTest, GenerationIsToldFromTheFirstBytes) {
  const std::string validate("\x00\xce\xf7\x85\x3c", 5);
  for (size_t cut = 0; cut < validate.size(); ++cut) {
    EXPECT_EQ(detectGeneration(validate.substr(0, cut)).status, ParseStatus::NeedMore) << cut;
  }
  auto d = detectGeneration(validate);
  EXPECT_EQ(d.status, ParseStatus::Complete);
  EXPECT_EQ(d.generation, kValidated);
  // 1.13's SET also starts with 0; its key length is not the magic.
  d = detectGeneration(std::string("\x00\x04\0\0\0\0\0\0\0/key", 13));
  EXPECT_EQ(d.status, ParseStatus::Complete);
  EXPECT_EQ(d.generation, kLegacy);
  EXPECT_FALSE(d.decisive);
  d = detectGeneration(std::string("\x00\xce\xf7\x00", 4));
  EXPECT_EQ(d.generation, kLegacy);
  d = detectGeneration("\x03");  // 1.13's (and 2.1's) ADD "init/"
  EXPECT_EQ(d.status, ParseStatus::Complete);
  EXPECT_EQ(d.generation, kLegacy);
  EXPECT_FALSE(d.decisive);
  d = detectGeneration("GET / HTTP/1.1\r\n");
  EXPECT_EQ(d.status, ParseStatus::Invalid);
  EXPECT_EQ(d.error,
            "first query code 71 is neither torch 2.2+'s VALIDATE nor a torch 1.13-2.1 query; not "
            "a TCPStore client");
  EXPECT_TRUE(detectGeneration("\x0b").status == ParseStatus::Complete);  // 2.1's CANCEL_WAIT
  EXPECT_EQ(detectGeneration("\x0c").status, ParseStatus::Invalid);
}

TEST(WireProtocolTest, UnknownCodesAreInvalidAndNamed) {
  Request out;
  auto r = parseRequest(kLegacy, "\x09", {}, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "unknown query code 9 for the legacy (torch 1.13, 2.0) protocol");
  r = parseRequest(kValidated, "\xff", {}, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "unknown query code 255 for the validated (torch 2.2 - 2.14) protocol");
}

TEST(WireProtocolTest, EncodingAQueryAGenerationLacksThrows) {
  EXPECT_THROW(encodeRequest(kLegacy, request(Op::MultiGet, {"/a"})), std::invalid_argument);
  EXPECT_THROW(encodeRequest(kValidated, request(Op::WatchKey, {"/a"})), std::invalid_argument);
}

TEST(WireProtocolTest, HexBytesForLogLines) {
  EXPECT_EQ(hexBytes(std::string("\x00\xce\x41", 3)), "00 ce 41");
  EXPECT_EQ(hexBytes(std::string(20, 'A'), 2), "41 41 … (20 bytes)");
}

}  // namespace
}  // namespace accel::store::wire
