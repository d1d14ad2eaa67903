#pragma once
// Store: the key-value interface ranks and agents rendezvous through. Implementations:
// TcpStoreClient (the job's store over TCP), MemoryStore (in one process's memory, for tests) and
// the launcher's EtcdStore (a failed round's end over etcd).

#include <chrono>
#include <cstdint>
#include <optional>
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

  // Each key's value, nullopt where it does not exist now; never waits. Key by key here; a
  // store that reads many keys in one request does so (EtcdStore).
  virtual std::vector<std::optional<std::string>> present(const std::vector<std::string>& keys);
};

}  // namespace accel::store
