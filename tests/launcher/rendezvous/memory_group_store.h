#pragma once
// The job's store in memory for whole StoreGroups (store_group.h) in one process: a
// MemoryStoreServer is the store and what its host knows (StoreHost: the presence waits and the
// failure watches parked, clearing the workers' keys), and each agent reaches it through a
// MemoryGroupStore of its own, whose connections are MemoryLinkStores (watches included). An
// agent's death is kill(): every connection it made is cut at once, its parked waits end, and the
// master sees it absent — as when a process dies and the kernel closes its sockets.

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "launcher/rendezvous/group_store.h"
#include "launcher/rendezvous/job_keys.h"
#include "libaccel/store/memory_store.h"
#include "memory_link_store.h"

namespace accel::launcher::testing {

class MemoryStoreServer : public StoreHost, public ParkedWaits {
 public:
  // The store of job `runId`: its presence keys and stop keys are what it counts.
  explicit MemoryStoreServer(const std::string& runId)
      : presence_prefix_(JobKeys(runId).presencePrefix()),
        stop_prefix_(JobKeys(runId).stopPrefix()) {}

  store::MemoryStore& data() { return data_; }

  void parked(const std::vector<std::string>& keys, int delta) override {
    std::lock_guard lock(mutex_);
    for (const auto& k : keys) parked_[k] += delta;
    changed_.notify_all();
  }

  bool waiting(const std::string& presenceKey, std::chrono::milliseconds grace) const override {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, grace, [&] { return count(presenceKey) > 0; });
  }
  size_t presentCount() const override {
    std::lock_guard lock(mutex_);
    return under(presence_prefix_);
  }
  bool awaitPresentAtMost(size_t n, std::chrono::milliseconds timeout) const override {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return under(presence_prefix_) <= n; });
  }
  bool awaitWatches(size_t n, std::chrono::milliseconds timeout) const override {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return under(stop_prefix_) >= n; });
  }
  size_t clearKeysExcept(const std::vector<std::string>& keep) override {
    return data_.clearKeysExcept(keep);
  }

 private:
  int count(const std::string& key) const {
    auto it = parked_.find(key);
    return it == parked_.end() ? 0 : it->second;
  }
  // The waits parked on keys under `prefix` (with mutex_ held).
  size_t under(const std::string& prefix) const {
    size_t n = 0;
    for (const auto& [key, waits] : parked_) {
      if (key.rfind(prefix, 0) == 0 && waits > 0) n += static_cast<size_t>(waits);
    }
    return n;
  }

  const std::string presence_prefix_, stop_prefix_;
  store::MemoryStore data_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::string, int> parked_;
};

// One agent's way to the in-memory store; `master`: it hosts the store.
class MemoryGroupStore : public GroupStore {
 public:
  MemoryGroupStore(MemoryStoreServer& server, bool master)
      : server_(server), master_(master), dead_(std::make_shared<std::atomic<bool>>(false)) {}

  // The agent's process died: every connection it made is cut, now and later. Thread-safe.
  void kill() { *dead_ = true; }

  Expected<std::optional<probes::Route>> reach(std::chrono::milliseconds, std::chrono::milliseconds,
                                               const Notify&) override {
    return std::optional<probes::Route>();  // in memory: no route to name
  }
  std::unique_ptr<LinkStore> connect(std::chrono::milliseconds) override {
    if (*dead_) throw NetworkError("the agent's process is gone");
    return std::make_unique<MemoryLinkStore>(server_.data(), &server_, dead_);
  }
  StoreHost* host() const override { return master_ ? &server_ : nullptr; }
  std::string address() const override { return "memory:29500"; }

 private:
  MemoryStoreServer& server_;
  const bool master_;
  const std::shared_ptr<std::atomic<bool>> dead_;
};

}  // namespace accel::launcher::testing
