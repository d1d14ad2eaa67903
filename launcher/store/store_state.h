#pragma once
// StoreState: the data and the rules of the job's store, without sockets — keys and values,
// WAITs parked until their keys exist, legacy WATCH_KEY subscriptions, torch 2.8's queues and
// 2.12's barriers.
// TcpStoreServer's loop feeds it one parsed request at a time and delivers what it sends.
// Semantics follow torch's own servers (TCPStoreBackend.cpp and TCPStoreLibUvBackend.cpp) where
// they agree, and the libuv server (the default since torch 2.4) where they differ; see
// execute(). Not thread-safe: one loop thread owns it.

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "libaccel/store/wire_protocol.h"

namespace accel::store {

class StoreState {
 public:
  // Delivers reply bytes to a connection (the loop queues and flushes them).
  using Send = std::function<void(uint64_t conn, const std::string& bytes)>;
  explicit StoreState(Send send) : send_(std::move(send)) {}

  // Tells `observer` the new value of every key written whose name starts with `prefix` (SET,
  // ADD, COMPARE_SET, APPEND, MULTI_SET), right after the write; one observer per call. The agent
  // reads progress heartbeats and the agents' keep-alives this way without a client of its own.
  using Observer = std::function<void(const std::string& key, const std::string& value)>;
  void observe(std::string prefix, Observer observer) {
    observers_.push_back({std::move(prefix), std::move(observer)});
  }

  // Carries out one request from connection `conn`; replies go through Send, now or (for a
  // parked WAIT) when the keys appear.
  void execute(uint64_t conn, const wire::Request& q);

  // The connection is gone: its parked WAITs and BARRIER arrivals and its watches are freed
  // (a BARRIER's count of arrivals stays: it is a key, as in torch).
  void disconnect(uint64_t conn);

  // Removes every key (and queue) whose name starts with none of `keep`; returns how many.
  // Parked waits stay parked: their keys are missing either way.
  size_t clearExcept(const std::vector<std::string>& keep);

  size_t keyCount() const { return data_.size(); }
  size_t parkedWaits() const { return waiters_.size(); }
  // WAITs answered because their keys came, since the state was made.
  uint64_t wokenWaits() const { return woken_waits_; }
  size_t parkedBarriers() const;
  size_t watchCount() const;
  // Entries of every table that indexes parked WAITs, BARRIERs and watches (by key and by
  // connection): 0 whenever nothing is parked or watched.
  size_t parkedEntries() const;
  // Counts the WAITs parked on keys that start with `prefix` (set once, before any request;
  // "": none): trackedWaits(), kept up to date as WAITs park and end, in constant time.
  void trackWaitsUnder(std::string prefix) { tracked_prefix_ = std::move(prefix); }
  size_t trackedWaits() const { return tracked_waits_; }
  // Keeps, for each key under `prefix` (set once, before any request; "": none), whether a WAIT
  // is parked on it: presentKeys(). A client that parks a WAIT on a key nobody sets is then
  // known to be connected until its connection closes. presenceVersion() changes whenever the
  // set does.
  void trackPresenceUnder(std::string prefix) { presence_prefix_ = std::move(prefix); }
  std::vector<std::string> presentKeys() const;
  uint64_t presenceVersion() const { return presence_version_; }

 private:
  struct Waiter {
    uint64_t conn = 0;
    std::vector<std::string> missing_keys;  // the keys it was parked on
    size_t missing = 0;                     // of those, how many are still absent
  };

  bool exists(const std::string& key) const;
  void written(const std::string& key, const std::string& value) {
    for (const auto& [prefix, observer] : observers_) {
      if (key.compare(0, prefix.size(), prefix) == 0) observer(key, value);
    }
  }
  void store(const std::string& key, std::string value);
  void keyCreated(const std::string& key);
  void notifyWatchers(const std::string& key, wire::WatchResponse event,
                      const std::string& oldValue, const std::string& newValue);
  void park(uint64_t conn, const std::vector<std::string>& keys);
  void wakeOne(const std::string& key);
  // One of waiter `id`'s keys appeared (its entry in waiting_ is already gone): answer it if
  // that was the last one.
  void keyArrived(uint64_t id);
  void barrier(uint64_t conn, const std::string& key, int64_t worldSize);
  std::string listKeys() const;
  void unpark(uint64_t waiterId);
  // `keepPresence`: all but the WAITs on presence keys (a CANCEL_WAIT; a closed connection ends
  // them all).
  void cancelWaits(uint64_t conn, bool keepPresence);
  bool isPresenceKey(const std::string& key) const;

  std::string compareSet(const wire::Request& q);
  int64_t add(const std::string& key, int64_t delta);
  void wait(uint64_t conn, const std::vector<std::string>& keys);
  int64_t deleteKey(const std::string& key);
  void append(const std::string& key, const std::string& value);
  std::string queuePop(const std::string& key);

  Send send_;
  std::vector<std::pair<std::string, Observer>> observers_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  uint64_t next_waiter_ = 1;
  std::unordered_map<uint64_t, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiting_;  // key → waiter ids
  bool tracked(const std::string& key) const {
    return !tracked_prefix_.empty() && key.compare(0, tracked_prefix_.size(), tracked_prefix_) == 0;
  }
  // `count` more (or fewer) waiters on `key`: the tracked and presence counts follow.
  void countWaiters(const std::string& key, long count);
  std::string tracked_prefix_;
  size_t tracked_waits_ = 0;  // (key, waiter) pairs of waiting_ under tracked_prefix_
  std::string presence_prefix_;
  std::unordered_map<std::string, size_t> presence_;  // key under presence_prefix_ → waiters
  uint64_t presence_version_ = 0;
  uint64_t woken_waits_ = 0;                                          // wokenWaits()
  std::unordered_map<uint64_t, std::vector<uint64_t>> conn_waiters_;  // conn → waiter ids
  std::unordered_map<std::string, std::set<uint64_t>> watchers_;      // key → connections
  std::unordered_map<uint64_t, std::unordered_set<std::string>> conn_watches_;  // conn → keys
  std::unordered_map<std::string, std::vector<uint64_t>> barriers_;  // key → connections waiting
};

}  // namespace accel::store
