#pragma once
// MemoryStore: the Store interface in one process's memory, for tests of what speaks through a
// store (the agents' rendezvous and round ends) without a server, sockets or ports. Its
// semantics are the TCP store's: get() and wait() block until the keys exist (at most their
// timeout, then accel::TimeoutError naming the keys), add() on an absent key starts at 0,
// compareSet() with an empty `expected` sets an absent key. Thread-safe: any number of threads
// share one MemoryStore (each agent of a test is a thread).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "libaccel/store/store.h"

namespace accel::store {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  // Removes every key that starts with none of `keep`; how many it removed (as the TCP store's
  // server does between a job's attempts).
  size_t clearKeysExcept(const std::vector<std::string>& keep);

 private:
  // Blocks until every key exists or `timeout` passed; throws TimeoutError naming the missing.
  void awaitKeys(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                 std::chrono::milliseconds timeout);

  std::mutex mutex_;
  std::condition_variable written_;
  std::map<std::string, std::string> data_;
};

}  // namespace accel::store
