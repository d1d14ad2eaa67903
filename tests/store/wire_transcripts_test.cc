// The exact bytes each torch release's TCPStore client sends, replayed against our server over
// a raw socket, with the exact replies torch's own servers give. This covers the releases we
// cannot install here (2.0-2.5, 2.7-2.14): each transcript is written from that release's
// TCPStore.cpp/TCPStoreBackend.hpp (tags named per transcript; see wire_protocol.cc), with the
// query codes spelled out literally rather than taken from our own table. The clients' bytes
// of every transcript are also the seeds of the store fuzz target (tests/fuzz/corpus/store/);
// TranscriptsSeedTheFuzzCorpus keeps the two equal.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/store/tcp_store_server.h"
#include "tests/store/raw_socket.h"

#ifndef ACCEL_FUZZ_CORPUS_DIR
#error "ACCEL_FUZZ_CORPUS_DIR must name tests/fuzz/corpus/store"
#endif

namespace accel::store {
namespace {

// Little-endian encoders, as torch's SendBuffer/tcputil write them.
std::string u8(uint8_t v) { return std::string(1, static_cast<char>(v)); }
std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string i64(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string str(const std::string& s) { return i64(static_cast<int64_t>(s.size())) + s; }
std::string keys(const std::vector<std::string>& ks) {
  std::string out = i64(static_cast<int64_t>(ks.size()));
  for (const auto& k : ks) out += str(k);
  return out;
}

// One request and the reply it must get ("" for none).
struct Step {
  std::string send;
  std::string reply;
};

// A client's whole conversation on one connection.
struct Transcript {
  std::string name;     // file name of its fuzz seed
  std::string release;  // what it is read from
  std::vector<Step> steps;
};

// Query codes of one release, written out as its QueryType enum numbers them.
struct Codes {
  int validate, set, compare_set, get, add, check, wait, getnumkeys, watch_key, delete_key, append,
      multi_get, multi_set, cancel_wait, ping, queue_push, queue_pop, queue_len, list_keys,
      barrier;  // -1: absent
};
// 1.13.1 and 2.0: TCPStore.cpp's enum.
constexpr Codes kTorch113{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
// 2.1: TCPStoreBackend.hpp at pytorch@3a67b827 (WATCH_KEY removed, no VALIDATE yet).
constexpr Codes kTorch21{-1, 0, 1, 2, 3, 4, 5, 6, -1, 7, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1};
// 2.2 - 2.14: VALIDATE inserted at 0 (pytorch@0278b218); PING 13 from 2.5 (v2.6.0), QUEUE_* 14-16
// from 2.8 (v2.8.0-rc4), LIST_KEYS 17 from 2.10, BARRIER 18 from 2.12 (v2.14.1).
constexpr Codes kTorch2x{0, 1, 2, 3, 4, 5, 6, 7, -1, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};

constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1, kReady = 0, kNotReady = 1;

// The common part: what every release's TCPStore(host, port, world_size=1) and its basic API
// send (get = WAIT + GET; wait_for_workers = ADD "init/" 1).
std::vector<Step> basics(const Codes& c) {
  return {
      {u8(c.add) + str("init/") + i64(1), i64(1)},
      {u8(c.set) + str("/k") + str("v"), ""},
      {u8(c.wait) + keys({"/k"}), u8(kStopWaiting)},
      {u8(c.get) + str("/k"), str("v")},
      {u8(c.add) + str("/c") + i64(5), i64(5)},
      {u8(c.add) + str("/c") + i64(-2), i64(3)},
      {u8(c.compare_set) + str("/k") + str("v") + str("w"), str("w")},
      {u8(c.compare_set) + str("/k") + str("x") + str("y"), str("w")},
      {u8(c.compare_set) + str("/absent") + str("e") + str("d"), str("e")},
      {u8(c.compare_set) + str("/new") + str("") + str("n"), str("n")},
      {u8(c.check) + keys({"/k", "/new"}), u8(kReady)},
      {u8(c.check) + keys({"/k", "/absent"}), u8(kNotReady)},
      {u8(c.getnumkeys), i64(4)},  // init/, /k, /c, /new
  };
}

// 2.1+: the extended API and a wait that times out and is cancelled.
std::vector<Step> extended(const Codes& c) {
  return {
      {u8(c.append) + str("/log") + str("a"), ""},
      {u8(c.append) + str("/log") + str("b"), ""},
      {u8(c.multi_set) + i64(2) + str("/m1") + str("x") + str("/m2") + str(""), ""},
      {u8(c.wait) + keys({"/log", "/m1", "/m2"}), u8(kStopWaiting)},
      {u8(c.multi_get) + keys({"/log", "/m1", "/m2"}), str("ab") + str("x") + str("")},
      {u8(c.wait) + keys({"/never"}), ""},  // parked; the client gives up:
      {u8(c.cancel_wait), u8(kWaitCanceled)},
      {u8(c.delete_key) + str("/m1"), i64(1)},
      {u8(c.delete_key) + str("/m1"), i64(0)},
      {u8(c.getnumkeys), i64(6)},  // init/, /k, /c, /new, /log, /m2
  };
}

std::vector<Step> handshake(const Codes& c, bool ping) {
  std::vector<Step> out = {{u8(c.validate) + u32(0x3C85F7CE), ""}};
  if (ping) out.push_back({u8(c.ping) + u32(4242), u32(4242)});  // the nonce is the client's pid
  return out;
}

std::vector<Transcript> transcripts() {
  auto join = [](std::vector<std::vector<Step>> parts) {
    std::vector<Step> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const Codes& v = kTorch2x;
  std::vector<Step> queues = {
      {u8(v.queue_push) + str("/q") + str("a"), ""},
      {u8(v.queue_push) + str("/q") + str("b"), ""},
      {u8(v.queue_len) + str("/q"), i64(2)},
      {u8(v.wait) + keys({"/q"}), u8(kStopWaiting)},  // queue_pop(block=True) waits first
      {u8(v.queue_pop) + str("/q"), i64(2) + str("a")},
      {u8(v.queue_pop) + str("/q"), i64(1) + str("b")},
      {u8(v.queue_pop) + str("/q"), i64(0)},  // empty: the client raises QueueEmptyError
  };
  // On a fresh store: LIST_KEYS's order is unspecified (ListKeysAnswersEveryKeyOnce checks more).
  std::vector<Step> listKeys = {{u8(v.list_keys), i64(0)}};
  std::vector<Step> barrier = {{u8(v.barrier) + str("/b") + i64(1), u8(kStopWaiting)}};
  return {
      {"torch-1.13", "v1.13.1 and v2.0 TCPStore.cpp",
       join({basics(kTorch113), {{u8(kTorch113.delete_key) + str("/k"), i64(1)}}})},
      {"torch-1.13-callback",
       "v1.13.1 TCPCallbackClient (watchKey)",
       {{u8(kTorch113.watch_key) + str("/w"), u8(3)}}},
      {"torch-2.1", "TCPStoreBackend.hpp at pytorch@3a67b827",
       join({basics(kTorch21), extended(kTorch21)})},
      {"torch-2.2", "VALIDATE, no PING: pytorch@0278b218 (2.2-2.4)",
       join({handshake(v, false), basics(v), extended(v)})},
      {"torch-2.6", "v2.6.0 (2.5-2.7)", join({handshake(v, true), basics(v), extended(v)})},
      {"torch-2.8", "v2.8.0-rc4 (2.8-2.9): queues",
       join({handshake(v, true), basics(v), extended(v), queues})},
      {"torch-2.10", "LIST_KEYS (2.10-2.11)", join({handshake(v, true), listKeys, basics(v)})},
      {"torch-2.12", "v2.14.1 (2.12-2.14): BARRIER",
       join({handshake(v, true), basics(v), extended(v), queues, barrier})},
  };
}

class WireTranscriptTest : public ::testing::TestWithParam<Transcript> {
 protected:
  void SetUp() override {
    TcpStoreServerOptions o;
    o.log = [this](const std::string& line) { log_.push_back(line); };
    server_ = TcpStoreServer::start(o);
  }
  int connectRaw() {
    int fd = testing::connectLoopback(server_->port());
    EXPECT_GE(fd, 0);
    return fd;
  }
  // True when nothing more arrives within 100 ms (no reply where torch sends none).
  static bool silent(int fd) {
    timeval tv{0, 100000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    bool quiet = ::recv(fd, &c, 1, MSG_PEEK) < 0;
    timeval back{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &back, sizeof back);
    return quiet;
  }
  std::unique_ptr<TcpStoreServer> server_;
  std::vector<std::string> log_;
};

TEST_P(WireTranscriptTest, EveryStepGetsTorchsReply) {
  const Transcript& t = GetParam();
  int fd = connectRaw();
  for (size_t i = 0; i < t.steps.size(); ++i) {
    const Step& s = t.steps[i];
    ASSERT_EQ(::send(fd, s.send.data(), s.send.size(), 0), static_cast<ssize_t>(s.send.size()));
    if (s.reply.empty()) {
      if (i + 1 < t.steps.size()) continue;  // the next request's reply proves it was taken
      EXPECT_TRUE(silent(fd)) << t.name << " step " << i;
      continue;
    }
    EXPECT_EQ(testing::readExactly(fd, s.reply.size()), s.reply)
        << t.name << " step " << i << " (" << t.release << ")";
  }
  EXPECT_TRUE(silent(fd)) << t.name << ": replies the torch server would not send";
  ::close(fd);
  EXPECT_TRUE(log_.empty()) << log_.front();
  EXPECT_EQ(server_->stats().connections_dropped, 0u);
}

INSTANTIATE_TEST_SUITE_P(Releases, WireTranscriptTest, ::testing::ValuesIn(transcripts()),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

TEST(WireTranscripts, ListKeysAnswersEveryKeyOnce) {
  auto server = TcpStoreServer::start({});
  std::string out = u8(0) + u32(0x3C85F7CE) + u8(1) + str("/a") + str("1") + u8(1) + str("/b") +
                    str("2") + u8(17);
  int fd = testing::connectLoopback(server->port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  int64_t n = 0;
  ASSERT_EQ(::recv(fd, &n, 8, MSG_WAITALL), 8);
  ASSERT_EQ(n, 2);
  std::string rest(2 * (8 + 2), '\0');
  ASSERT_EQ(::recv(fd, rest.data(), rest.size(), MSG_WAITALL), static_cast<ssize_t>(rest.size()));
  EXPECT_TRUE(rest == str("/a") + str("/b") || rest == str("/b") + str("/a")) << rest;
  ::close(fd);
}

// The fuzz corpus holds each transcript's client bytes; regenerate with
// ACCEL_WRITE_FUZZ_SEEDS=1 build/tests/store_tests --gtest_filter='*Seed*'.
TEST(WireTranscripts, TranscriptsSeedTheFuzzCorpus) {
  for (const auto& t : transcripts()) {
    std::string bytes;
    for (const auto& s : t.steps) bytes += s.send;
    const std::string path = std::string(ACCEL_FUZZ_CORPUS_DIR) + "/" + t.name;
    if (std::getenv("ACCEL_WRITE_FUZZ_SEEDS")) std::ofstream(path, std::ios::binary) << bytes;
    std::ifstream in(path, std::ios::binary);
    std::stringstream seed;
    seed << in.rdbuf();
    EXPECT_EQ(seed.str(), bytes) << path << " differs from its transcript";
  }
}

}  // namespace
}  // namespace accel::store
