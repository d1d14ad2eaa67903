#pragma once
// MemoryLinkStore: a LinkStore (launcher/rendezvous/link_store.h) over a MemoryStore that the
// test's machines share — every call as the MemoryStore makes it, and watches: startWait's
// descriptor (an eventfd) becomes readable once the keys exist, or at once when the connection
// is cut (interrupt()), as a TCP connection's does when its peer goes.

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "accel/error.h"
#include "launcher/rendezvous/c10d/link_store.h"
#include "libaccel/store/memory_store.h"

namespace accel::launcher::testing {

class MemoryLinkStore : public LinkStore {
 public:
  explicit MemoryLinkStore(store::MemoryStore& data) : data_(data) {}
  ~MemoryLinkStore() override {
    cut_ = true;
    if (watcher_.joinable()) watcher_.join();
    if (event_fd_ >= 0) ::close(event_fd_);
  }

  void set(const std::string& key, const std::string& value) override {
    open(), data_.set(key, value);
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    wait({key}, timeout);
    return data_.get(key, std::chrono::milliseconds(0));
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return open(), data_.add(key, delta);
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    return open(), data_.compareSet(key, expected, desired);
  }
  // Blocks as the MemoryStore's wait does, looking at the cut every 20 ms (its waits cannot be
  // cancelled): a cut connection fails a blocked call as a TCP client's interrupt does.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      open();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        data_.wait(keys,
                   std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(20)));
        return;
      } catch (const TimeoutError&) {
        if (left <= std::chrono::milliseconds(20)) throw;
      }
    }
  }
  bool check(const std::vector<std::string>& keys) override { return open(), data_.check(keys); }
  bool deleteKey(const std::string& key) override { return open(), data_.deleteKey(key); }
  int64_t numKeys() override { return open(), data_.numKeys(); }

  // A thread of its own waits for the keys (looking at the cut every 20 ms: the MemoryStore's
  // waits cannot be cancelled) and signals the descriptor.
  int startWait(const std::vector<std::string>& keys) override {
    event_fd_ = ::eventfd(0, EFD_CLOEXEC);
    watcher_ = std::thread([this, keys] {
      while (!cut()) {
        try {
          data_.wait(keys, std::chrono::milliseconds(20));
          break;
        } catch (const TimeoutError&) {
        }
      }
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
    });
    return event_fd_;
  }
  void finishWait() override {
    if (watcher_.joinable()) watcher_.join();
    open();
  }
  // Presence is not counted in memory (the tests of c10d/job_link.h need none).
  void park(const std::vector<std::string>&) override {}
  void interrupt() override { cut_ = true; }
  void setTimeout(std::chrono::milliseconds) override {}
  void setConnectTimeouts(std::chrono::milliseconds, std::chrono::milliseconds) override {}

 private:
  bool cut() const { return cut_; }
  void open() const {
    if (cut()) throw NetworkError("the connection to the in-memory store was cut");
  }

  store::MemoryStore& data_;
  std::atomic<bool> cut_{false};
  int event_fd_ = -1;
  std::thread watcher_;
};

}  // namespace accel::launcher::testing
