// MemoryStore keeps the TCP store's semantics: blocking get and wait until the keys exist (or a
// TimeoutError naming the missing ones), add from 0, torch's compare-and-set, threads sharing it.

#include "libaccel/store/memory_store.h"

#include <future>

#include <gtest/gtest.h>

#include "accel/error.h"

namespace accel::store {
namespace {

using namespace std::chrono_literals;

TEST(MemoryStoreTest, TheTcpStoresSemantics) {
  MemoryStore s;
  EXPECT_EQ(s.add("n", 2), 2);
  EXPECT_EQ(s.add("n", 3), 5);
  EXPECT_EQ(s.compareSet("c", "", "first"), "first");   // absent, expected empty: set
  EXPECT_EQ(s.compareSet("c", "", "second"), "first");  // present: unchanged
  EXPECT_EQ(s.compareSet("c", "first", "third"), "third");
  EXPECT_EQ(s.compareSet("absent", "x", "y"), "x");  // torch: the expected value, nothing set
  EXPECT_FALSE(s.check({"absent"}));
  EXPECT_TRUE(s.check({"n", "c"}));
  EXPECT_EQ(s.numKeys(), 2);
  EXPECT_TRUE(s.deleteKey("c"));
  EXPECT_FALSE(s.deleteKey("c"));
  try {
    s.wait({"n", "a", "b"}, 20ms);
    FAIL() << "waited for keys that never came";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "wait for 'a', 'b' in the in-memory store timed out after 20 ms");
  }
}

// A thread blocked in wait() wakes when another thread adds the last key, not before: the
// waiter has seen the first key written and still waits for the second.
TEST(MemoryStoreTest, WaitBlocksUntilTheLastKeyIsWritten) {
  MemoryStore s;
  auto waited = std::async(std::launch::async, [&] {
    s.wait({"a", "b"}, 10s);
    return s.get("a", 0ms) + s.get("b", 0ms);
  });
  s.set("a", "1");
  EXPECT_EQ(waited.wait_for(50ms), std::future_status::timeout);  // "b" is still missing
  s.set("b", "2");
  EXPECT_EQ(waited.get(), "12");
}

}  // namespace
}  // namespace accel::store
