#pragma once
// Store: the key-value interface ranks and agents rendezvous through. Implementations:
// TcpStoreClient (the job's store over TCP) and PrefixStore (a namespace over another store).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace accel::store {

class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` to `value` (overwrites). Not blocking beyond the network round trip.
  virtual void set(const std::string& key, const std::string& value) = 0;

  // Blocks until `key` exists (at most `timeout`), then returns its value. Throws
  // accel::TimeoutError naming the key and the store's address.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  // Atomically adds `delta` to the integer at `key` (0 when absent) and returns the result.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  // Sets `key` to `desired` if its value is `expected` (or, with an empty `expected`, if it is
  // absent); returns the value stored afterwards (torch's semantics).
  virtual std::string compareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) = 0;

  // Blocks until every key exists, at most `timeout`; throws accel::TimeoutError listing the
  // keys still missing.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  // Whether every key exists now.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Removes `key`; returns whether it existed.
  virtual bool deleteKey(const std::string& key) = 0;

  // The number of keys in the whole store (not only under a prefix).
  virtual int64_t numKeys() = 0;
};

// Every key of `inner` seen through "<prefix>/" (torch's PrefixStore convention).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, Store& inner) : prefix_(std::move(prefix) + "/"), inner_(inner) {}

  void set(const std::string& key, const std::string& value) override {
    inner_.set(prefix_ + key, value);
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_.get(prefix_ + key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return inner_.add(prefix_ + key, delta);
  }
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    return inner_.compareSet(prefix_ + key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_.wait(prefixed(keys), timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_.check(prefixed(keys)); }
  bool deleteKey(const std::string& key) override { return inner_.deleteKey(prefix_ + key); }
  int64_t numKeys() override { return inner_.numKeys(); }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::string prefix_;
  Store& inner_;
};

}  // namespace accel::store
