#include "libaccel/store/wire_protocol.h"

#include <gtest/gtest.h>

namespace accel::store::wire {
namespace {

Request request(QueryType type, std::vector<std::string> keys, std::string value = "", std::string desired = "",
                int64_t delta = 0) {
  Request r;
  r.type = type;
  r.keys = std::move(keys);
  r.value = std::move(value);
  r.desired = std::move(desired);
  r.delta = delta;
  return r;
}

std::vector<Request> samples() {
  return {request(QueryType::Set, {"/k"}, std::string("v\0w", 3)),
          request(QueryType::CompareSet, {"/k"}, "old", "new"),
          request(QueryType::Get, {"/k"}),
          request(QueryType::Add, {"init/"}, "", "", -5),
          request(QueryType::Check, {"/a", "/b"}),
          request(QueryType::Wait, {"/a", "", "/c"}),
          request(QueryType::GetNumKeys, {}),
          request(QueryType::WatchKey, {"/w"}),
          request(QueryType::DeleteKey, {"/k"})};
}

TEST(WireProtocolTest, BytesMatchTorch113Client) {
  // As captured from python3-torch 1.13: ADD "init/" 1 and SET "/key" "val".
  EXPECT_EQ(encodeRequest(request(QueryType::Add, {"init/"}, "", "", 1)),
            std::string("\x03\x05\0\0\0\0\0\0\0init/\x01\0\0\0\0\0\0\0", 22));
  EXPECT_EQ(encodeRequest(request(QueryType::Set, {"/key"}, "val")),
            std::string("\x00\x04\0\0\0\0\0\0\0/key\x03\0\0\0\0\0\0\0val", 24));
}

TEST(WireProtocolTest, RoundTripsEveryQueryType) {
  for (const auto& q : samples()) {
    std::string bytes = encodeRequest(q) + "trailing";
    Request out;
    auto r = parseRequest(bytes, {}, out);
    ASSERT_EQ(r.status, ParseStatus::Complete) << static_cast<int>(q.type);
    EXPECT_EQ(r.consumed, bytes.size() - 8);
    EXPECT_EQ(out.type, q.type);
    EXPECT_EQ(out.keys, q.keys);
    EXPECT_EQ(out.value, q.value);
    EXPECT_EQ(out.desired, q.desired);
    EXPECT_EQ(out.delta, q.delta);
  }
}

TEST(WireProtocolTest, EveryTruncationNeedsMore) {
  for (const auto& q : samples()) {
    std::string bytes = encodeRequest(q);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      Request out;
      auto r = parseRequest(std::string_view(bytes.data(), cut), {}, out);
      EXPECT_EQ(r.status, ParseStatus::NeedMore) << "type " << static_cast<int>(q.type) << " cut at " << cut;
    }
  }
}

TEST(WireProtocolTest, UnknownTypeIsInvalid) {
  Request out;
  auto r = parseRequest("\x09", {}, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "unknown query type 9");
  EXPECT_EQ(parseRequest("\xff", {}, out).status, ParseStatus::Invalid);
}

TEST(WireProtocolTest, AbsurdLengthsAreInvalidBeforeAnyAllocation) {
  ParseLimits limits;
  limits.max_value_bytes = 1024;
  limits.max_keys = 10;
  Request out;
  std::string huge("\x02", 1);
  putUint64(huge, 1ull << 62);  // a GET whose key claims 4 EiB
  auto r = parseRequest(huge, limits, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "a key or value is longer than the limit of 1024 bytes");
  std::string many("\x05", 1);
  putUint64(many, 11);
  r = parseRequest(many, limits, out);
  EXPECT_EQ(r.status, ParseStatus::Invalid);
  EXPECT_EQ(r.error, "a list of 11 keys is longer than the limit of 10");
}

}  // namespace
}  // namespace accel::store::wire
