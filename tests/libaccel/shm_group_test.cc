// The shared-memory group with ranks as real processes (fork: this binary has no LibTorch and
// no threads), its reductions against a reference, deaths and timeouts, and segment cleanup.

#include "libaccel/comm/shm_group.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "accel/error.h"

namespace accel::shm {
namespace {

bool segmentExists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// Runs body(group) in `size` forked ranks over a fresh segment; each rank's report (what it
// wrote, or its exception's message) comes back through a pipe, in rank order. A rank that
// finished without error reports "ok" plus what it wrote.
struct Ranks {
  std::vector<std::string> reports;
  std::vector<int> exitCodes;
};

std::string readAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

Ranks runRanks(int size, const GroupOptions& options,
               const std::function<std::string(Group&)>& body, std::string* segmentName = nullptr) {
  auto segment = Segment::create("shm-group-test", segmentBytes(size, options));
  EXPECT_TRUE(segment.ok()) << (segment.ok() ? "" : segment.error());
  const uint64_t nonce = Group::initialise(*segment, size, options);
  const std::string name = segment->name();
  if (segmentName) *segmentName = name;
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int rank = 0; rank < size; ++rank) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      std::string report;
      int code = 0;
      try {
        // Rank 0 takes the creator's Segment (which removes the name at attach); the others open.
        Segment mine = rank == 0 ? std::move(*segment)
                                 : std::move(Segment::open(name, segment->size()).value());
        Group group(std::move(mine), rank, size, nonce, options);
        group.attach();
        report = "ok " + body(group);
      } catch (const std::exception& e) {
        report = e.what();
        code = 1;
      }
      (void)!::write(fds[1], report.data(), report.size());
      ::_exit(code);
    }
    ::close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  Ranks out;
  for (int rank = 0; rank < size; ++rank) {
    out.reports.push_back(readAll(pipes[static_cast<size_t>(rank)]));
    ::close(pipes[static_cast<size_t>(rank)]);
    int status = 0;
    ::waitpid(pids[static_cast<size_t>(rank)], &status, 0);
    out.exitCodes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return out;
}

void expectAllOk(const Ranks& ranks) {
  for (size_t r = 0; r < ranks.reports.size(); ++r) {
    EXPECT_EQ(ranks.reports[r].substr(0, 2), "ok") << "rank " << r << ": " << ranks.reports[r];
    EXPECT_EQ(ranks.exitCodes[r], 0) << "rank " << r;
  }
}

// Rank r's element i: small integers, exact in every dtype, different on every rank.
double valueOf(int rank, size_t i) {
  return static_cast<double>(static_cast<int>((i * 7 + rank * 13) % 17) - 8);
}

template <typename T>
std::string checkAllreduce(Group& g, size_t count, DType dtype, Op op, T (*from)(double),
                           double (*to)(T)) {
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = from(valueOf(g.rank(), i));
  g.allreduce(data.data(), count, dtype, op);
  for (size_t i = 0; i < count; ++i) {
    double want = valueOf(0, i);
    for (int r = 1; r < g.size(); ++r) {
      const double v = valueOf(r, i);
      want = op == Op::Sum ? want + v : op == Op::Max ? std::max(want, v) : std::min(want, v);
    }
    if (to(data[i]) != want) {
      return std::string(dtypeName(dtype)) + " op " + std::to_string(static_cast<int>(op)) +
             " count " + std::to_string(count) + " element " + std::to_string(i) + ": " +
             std::to_string(to(data[i])) + " != " + std::to_string(want);
    }
  }
  return "";
}

template <typename T>
T fromDouble(double v) {
  return static_cast<T>(v);
}
template <typename T>
double toDouble(T v) {
  return static_cast<double>(v);
}
uint16_t bf16From(double v) { return floatToBf16(static_cast<float>(v)); }
double bf16To(uint16_t v) { return bf16ToFloat(v); }
uint16_t halfFrom(double v) { return floatToHalf(static_cast<float>(v)); }
double halfTo(uint16_t v) { return halfToFloat(v); }

// Every dtype and op, at sizes that take the small path, the split path and several pieces.
std::string checkEveryDtype(Group& g) {
  std::string bad;
  for (size_t count : {size_t{1}, size_t{37}, size_t{3000}, size_t{20000}}) {
    for (Op op : {Op::Sum, Op::Max, Op::Min}) {
      bad += checkAllreduce<float>(g, count, DType::F32, op, fromDouble<float>, toDouble<float>);
      bad += checkAllreduce<double>(g, count, DType::F64, op, fromDouble<double>, toDouble<double>);
      bad += checkAllreduce<uint16_t>(g, count, DType::BF16, op, bf16From, bf16To);
      bad += checkAllreduce<uint16_t>(g, count, DType::F16, op, halfFrom, halfTo);
      bad += checkAllreduce<int8_t>(g, count, DType::I8, op, fromDouble<int8_t>, toDouble<int8_t>);
      bad +=
          checkAllreduce<int16_t>(g, count, DType::I16, op, fromDouble<int16_t>, toDouble<int16_t>);
      bad +=
          checkAllreduce<int32_t>(g, count, DType::I32, op, fromDouble<int32_t>, toDouble<int32_t>);
      bad +=
          checkAllreduce<int64_t>(g, count, DType::I64, op, fromDouble<int64_t>, toDouble<int64_t>);
    }
  }
  return bad;
}

GroupOptions smallSlots() {
  GroupOptions o;
  o.slot_bytes = 8192;  // 20000 floats take 10 pieces
  o.small_bytes = 1024;
  o.timeout = std::chrono::seconds(20);
  return o;
}

class ShmGroupTest : public ::testing::TestWithParam<int> {};

// With either kind of store, and with the one chosen when the group forms.
TEST_P(ShmGroupTest, EveryDtypeAndOpMatchesTheReference) {
  for (Stores stores : {Stores::Plain, Stores::Streaming, Stores::Auto}) {
    GroupOptions options = smallSlots();
    options.stores = stores;
    const Ranks ranks = runRanks(GetParam(), options, [stores](Group& g) {
      if (stores != Stores::Auto && g.streaming() != (stores == Stores::Streaming))
        return std::string("WRONG STORES");
      std::string bad = checkEveryDtype(g);
      return bad.empty() ? std::string() : "MISMATCH " + bad.substr(0, 300);
    });
    expectAllOk(ranks);
    for (const auto& report : ranks.reports)
      EXPECT_EQ(report, "ok ") << "stores " << static_cast<int>(stores);
  }
}

// Stores::Auto times both kinds while the group forms; every rank follows rank 0's choice.
TEST_P(ShmGroupTest, TheChosenStoresAreTheSameOnEveryRank) {
  for (int run = 0; run < 3; ++run) {
    const Ranks ranks =
        runRanks(GetParam(), smallSlots(), [](Group& g) { return std::to_string(g.streaming()); });
    expectAllOk(ranks);
    for (const auto& report : ranks.reports) {
      EXPECT_TRUE(report == "ok 0" || report == "ok 1") << report;
      EXPECT_EQ(report, ranks.reports[0]);
    }
  }
}

TEST_P(ShmGroupTest, BroadcastAllgatherAndBarrierAcrossPieces) {
  const int size = GetParam();
  const Ranks ranks = runRanks(size, smallSlots(), [size](Group& g) {
    std::string out;
    for (int root = 0; root < size; ++root) {
      std::vector<uint8_t> data(20000, static_cast<uint8_t>(g.rank()));
      if (g.rank() == root)
        for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + root);
      g.broadcast(data.data(), data.size(), root);
      for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] != static_cast<uint8_t>(i * 31 + root))
          return "broadcast from " + std::to_string(root) + " byte " + std::to_string(i);
      }
    }
    std::vector<int32_t> mine(5000), all(5000 * static_cast<size_t>(size));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = g.rank() * 100000 + static_cast<int32_t>(i);
    g.allgather(mine.data(), mine.size() * sizeof(int32_t), all.data());
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < mine.size(); ++i) {
        if (all[static_cast<size_t>(r) * mine.size() + i] != r * 100000 + static_cast<int32_t>(i))
          return "allgather rank " + std::to_string(r);
      }
    }
    for (int i = 0; i < 100; ++i) g.barrier();
    return out;
  });
  expectAllOk(ranks);
}

// Rank r's float32 element i for the bf16 wire: most not exact in bf16, of mixed magnitudes, and
// a NaN, an infinity, a negative zero and a sum that overflows bf16 among them.
float wireValueOf(int rank, size_t i) {
  if (i == 5) return rank == 1 ? std::nanf("") : 1.0f;
  if (i == 6) return rank == 0 ? INFINITY : -2.5f;
  if (i == 7) return -0.0f;
  if (i == 8) return 3.3e38f;
  return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(rank)) *
         static_cast<float>(1 + i % 7) * 1000.0f;
}

// The bf16 wire's sum, bit for bit as rounding every rank's part to bf16 and summing in rank
// order in fp32, the sum rounded once — at sizes that take the small path, the split path and
// several pieces; and its average, each part multiplied by 1/ranks (as a float) before it is
// rounded.
TEST_P(ShmGroupTest, Bf16WireEqualsRoundingEachPartThenSumming) {
  const Ranks ranks = runRanks(GetParam(), smallSlots(), [](Group& g) {
    for (const float scale : {1.0f, static_cast<float>(1.0 / g.size())}) {
      for (size_t count : {size_t{1}, size_t{37}, size_t{3000}, size_t{20000}}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = wireValueOf(g.rank(), i);
        g.allreduceBf16Wire(data.data(), count, scale);
        for (size_t i = 0; i < count; ++i) {
          float acc = 0;
          for (int r = 0; r < g.size(); ++r) {
            const float part = bf16ToFloat(floatToBf16(wireValueOf(r, i) * scale));
            acc = r == 0 ? part : acc + part;
          }
          const float want = bf16ToFloat(floatToBf16(acc));
          if (std::memcmp(&want, &data[i], sizeof want) != 0)
            return "scale " + std::to_string(scale) + " count " + std::to_string(count) +
                   " element " + std::to_string(i) + ": " + std::to_string(data[i]) +
                   " != " + std::to_string(want);
        }
      }
    }
    return std::string();
  });
  expectAllOk(ranks);
  for (const auto& report : ranks.reports) EXPECT_EQ(report, "ok ");
}

// The average's sum, bit for bit as scaling every rank's part by 1/ranks (as a float) and summing
// in rank order — with plain stores (scaled on the way) and streaming ones (scaled in a pass),
// at sizes that take the small path, the split path and several pieces.
TEST_P(ShmGroupTest, MeanEqualsScalingEachPartThenSumming) {
  for (Stores stores : {Stores::Plain, Stores::Streaming}) {
    GroupOptions options = smallSlots();
    options.stores = stores;
    const Ranks ranks = runRanks(GetParam(), options, [](Group& g) {
      const float scale = static_cast<float>(1.0 / g.size());
      for (size_t count : {size_t{1}, size_t{37}, size_t{3000}, size_t{20000}}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = wireValueOf(g.rank(), i);
        g.allreduceMean(data.data(), count, scale);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < g.size(); ++r) {
            const float part = wireValueOf(r, i) * scale;
            want = r == 0 ? part : want + part;
          }
          if (std::memcmp(&want, &data[i], sizeof want) != 0)
            return "count " + std::to_string(count) + " element " + std::to_string(i) + ": " +
                   std::to_string(data[i]) + " != " + std::to_string(want);
        }
      }
      return std::string();
    });
    expectAllOk(ranks);
    for (const auto& report : ranks.reports)
      EXPECT_EQ(report, "ok ") << "stores " << static_cast<int>(stores);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmGroupTest, ::testing::Values(2, 3, 4));

// Once every rank attached, the name is gone from /dev/shm (rank 0 removes it before its first
// operation): a job killed from then on leaves nothing behind.
TEST(ShmGroup, AttachRemovesTheSegmentsName) {
  std::string name;
  const Ranks ranks = runRanks(
      2, smallSlots(),
      [&name](Group& g) {
        const bool before = segmentExists(name);  // rank 1 may get here before rank 0 removed it
        g.barrier();
        return std::string(segmentExists(name) ? "still there" : "gone") +
               (g.rank() == 0 && before ? " early" : "");
      },
      &name);
  expectAllOk(ranks);
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(ranks.reports[0], "ok gone");
  EXPECT_EQ(ranks.reports[1], "ok gone");
}

// Rank 1 exits right after attaching while rank 0 all-reduces: rank 0 fails well within its
// timeout, naming rank 1.
TEST(ShmGroup, APeerThatDiesMidCollectiveIsNamed) {
  GroupOptions o = smallSlots();
  o.timeout = std::chrono::seconds(60);
  const auto start = std::chrono::steady_clock::now();
  const Ranks ranks = runRanks(2, o, [](Group& g) {
    if (g.rank() == 1) ::_exit(7);
    std::vector<float> data(100000, 1.0f);
    g.allreduce(data.data(), data.size(), DType::F32, Op::Sum);
    return std::string("all-reduce returned");
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ranks.exitCodes[1], 7);
  EXPECT_EQ(ranks.exitCodes[0], 1);
  EXPECT_NE(ranks.reports[0].find("all-reduce"), std::string::npos) << ranks.reports[0];
  EXPECT_NE(ranks.reports[0].find("rank 1 (pid"), std::string::npos) << ranks.reports[0];
  EXPECT_TRUE(ranks.reports[0].find("died") != std::string::npos ||
              ranks.reports[0].find("gone") != std::string::npos)
      << ranks.reports[0];
  EXPECT_LT(seconds, 30.0);  // not the 60 s timeout
}

// Rank 2 lives on but never joins the all-reduce: the others time out naming it, and the first
// to fail marks the group failed so a later operation is refused at once.
TEST(ShmGroup, AStuckPeerTimesOutAndIsNamed) {
  GroupOptions o = smallSlots();
  o.timeout = std::chrono::milliseconds(300);
  int block[2];
  ASSERT_EQ(::pipe(block), 0);
  const Ranks ranks = runRanks(3, o, [&](Group& g) {
    if (g.rank() == 2) {
      char c;
      for (int done = 0; done < 2;)
        done += ::read(block[0], &c, 1) == 1 ? 1 : 0;  // both others finished
      return std::string("stuck rank released");
    }
    std::string first;
    try {
      int32_t x = 1;
      g.allreduce(&x, 1, DType::I32, Op::Sum);
    } catch (const TimeoutError& e) {
      first = std::string("timeout: ") + e.what();
    } catch (const Error& e) {
      first = std::string("error: ") + e.what();
    }
    std::string then = "barrier passed";
    try {
      g.barrier();
    } catch (const Error& e) {
      then = e.what();
    }
    (void)!::write(block[1], "x", 1);  // releases rank 2
    return first + " | then: " + then;
  });
  ::close(block[0]);
  ::close(block[1]);
  for (int r = 0; r < 2; ++r) {
    const std::string& report = ranks.reports[static_cast<size_t>(r)];
    // Its own timeout names rank 2, or (when the other rank timed out first) the failure it saw.
    const std::string first = report.substr(0, report.find(" | then: "));
    EXPECT_TRUE(first.find("waiting for rank 2 (pid") != std::string::npos ||
                first.find("rank 2 did not arrive in time") != std::string::npos)
        << report;
    EXPECT_NE(report.find("then: shared-memory group: rank"), std::string::npos) << report;
    EXPECT_NE(report.find("stopped the group: rank 2 did not arrive in time"), std::string::npos)
        << report;
  }
  // At least one rank timed out itself; the other may have seen the failure first.
  EXPECT_TRUE(ranks.reports[0].find("ok timeout: ") == 0 ||
              ranks.reports[1].find("ok timeout: ") == 0)
      << ranks.reports[0] << "\n"
      << ranks.reports[1];
}

TEST(ShmSegment, SweepRemovesOnlySegmentsOfDeadCreators) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    auto s = Segment::create("sweep-test", 4096);
    const std::string name = s.ok() ? s->name() : "";
    (void)!::write(ready[1], name.data(), name.size());
    ::kill(::getpid(), SIGKILL);  // dies without removing it
  }
  ::close(ready[1]);
  const std::string dead = readAll(ready[0]);
  ::close(ready[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_FALSE(dead.empty());
  ASSERT_TRUE(segmentExists(dead));
  auto alive = Segment::create("sweep-test", 4096);
  ASSERT_TRUE(alive.ok());
  EXPECT_TRUE(isStaleSegmentName(dead.c_str()));
  EXPECT_FALSE(isStaleSegmentName(alive->name().c_str()));
  EXPECT_FALSE(isStaleSegmentName("accel-shm-not-a-pid"));
  EXPECT_FALSE(isStaleSegmentName("accel-shm-0"));
  // Another user's name is never ours to judge, even with a dead creator's pid.
  const std::string otherUser =
      "accel-shm-" + std::to_string(::getuid() + 1) + dead.substr(dead.find('-', 10));
  EXPECT_FALSE(isStaleSegmentName(otherUser.c_str())) << otherUser;
  EXPECT_GE(sweepStaleSegments(), 1);
  EXPECT_FALSE(segmentExists(dead));
  EXPECT_TRUE(segmentExists(alive->name()));
}

TEST(ShmReduce, HalfConversionsRoundTrip) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(1e6f), 0x7c00);                // overflow: infinity
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // halfway, even below: down
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02);  // halfway, odd below: up
  EXPECT_EQ(halfToFloat(0x0001), 0x1.0p-24f);          // the smallest subnormal
  for (uint32_t h = 0; h < 0x7c00; ++h) {              // every finite positive half
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(ShmReduce, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), 0x3f80);  // halfway, even below: down
  EXPECT_EQ(floatToBf16(1.0f + 3.0f / 256), 0x3f82);  // halfway, odd below: up
  EXPECT_EQ(floatToBf16(std::nanf("")) & 0x7fc0, 0x7fc0);
  // Three bf16 values accumulated in fp32, rounded once: 256 + 1 + 1 = 258 (bf16 steps of 2
  // there), where summing in bf16 would give 256 (256 + 1 rounds back to 256 each time).
  const uint16_t a = floatToBf16(256.0f), b = floatToBf16(1.0f);
  const void* in[3] = {&a, &b, &b};
  uint16_t out = 0;
  reduce(&out, in, 3, 1, DType::BF16, Op::Sum);
  EXPECT_EQ(bf16ToFloat(out), 258.0f);
}

// Streaming stores take 16-byte-aligned destinations: every head, body and tail split.
TEST(ShmReduce, StreamCopyEqualsMemcpyAtEveryAlignment) {
  std::vector<unsigned char> src(5000), dst(5100);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 31 + 7);
  for (size_t offset = 0; offset < 17; ++offset) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{63}, size_t{64},
                         size_t{65}, size_t{200}, size_t{4097}}) {
      std::fill(dst.begin(), dst.end(), 0xee);
      streamCopy(dst.data() + offset, src.data() + 3, bytes);
      for (size_t i = 0; i < dst.size(); ++i) {
        const bool inside = i >= offset && i < offset + bytes;
        ASSERT_EQ(dst[i], inside ? src[3 + i - offset] : 0xee)
            << "offset " << offset << " bytes " << bytes << " at " << i;
      }
    }
  }
}

// In place (out is one of the inputs, not the first) with a mirror: both hold the sum, over
// several blocks and a tail.
TEST(ShmReduce, InPlaceIntoAnyInputWithAMirror) {
  const size_t count = 2500;
  std::vector<float> a(count), b(count), mirror(count + 16, -1.0f);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i + 1);
  }
  const void* in[2] = {a.data(), b.data()};
  reduce(b.data(), in, 2, count, DType::F32, Op::Sum, mirror.data());
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(b[i], static_cast<float>(3 * i + 1)) << i;
    ASSERT_EQ(mirror[i], b[i]) << i;
  }
  EXPECT_EQ(mirror[count], -1.0f);  // nothing past the end
}

}  // namespace
}  // namespace accel::shm
