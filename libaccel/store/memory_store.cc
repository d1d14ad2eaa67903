#include "libaccel/store/memory_store.h"

#include <algorithm>

#include "accel/error.h"

namespace accel::store {

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mutex_);
    data_[key] = value;
  }
  written_.notify_all();
}

std::string MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  awaitKeys(lock, {key}, timeout);
  return data_.at(key);
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    value = (it == data_.end() ? 0 : std::stoll(it->second)) + delta;
    data_[key] = std::to_string(value);
  }
  written_.notify_all();
  return value;
}

std::string MemoryStore::compareSet(const std::string& key, const std::string& expected,
                                    const std::string& desired) {
  std::string now;
  {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    const bool matches = it == data_.end() ? expected.empty() : it->second == expected;
    if (matches) data_[key] = desired;
    now = it == data_.end() && !matches ? expected : data_[key];
  }
  written_.notify_all();
  return now;
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  awaitKeys(lock, keys, timeout);
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& k) { return data_.count(k) > 0; });
}

bool MemoryStore::deleteKey(const std::string& key) {
  std::lock_guard lock(mutex_);
  return data_.erase(key) > 0;
}

size_t MemoryStore::clearKeysExcept(const std::vector<std::string>& keep) {
  std::lock_guard lock(mutex_);
  size_t removed = 0;
  for (auto it = data_.begin(); it != data_.end();) {
    bool kept = false;
    for (const auto& prefix : keep) kept = kept || it->first.rfind(prefix, 0) == 0;
    if (kept) {
      ++it;
    } else {
      it = data_.erase(it);
      ++removed;
    }
  }
  return removed;
}

int64_t MemoryStore::numKeys() {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(data_.size());
}

void MemoryStore::awaitKeys(std::unique_lock<std::mutex>& lock,
                            const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) {
  auto present = [&] {
    return std::all_of(keys.begin(), keys.end(),
                       [this](const std::string& k) { return data_.count(k) > 0; });
  };
  if (written_.wait_for(lock, timeout, present)) return;
  std::string missing;
  for (const auto& k : keys) {
    if (!data_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
  }
  throw TimeoutError("wait for " + missing + " in the in-memory store timed out after " +
                     std::to_string(timeout.count()) + " ms");
}

}  // namespace accel::store
