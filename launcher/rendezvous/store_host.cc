#include "launcher/rendezvous/store_host.h"

#include <cstdlib>

#include "launcher/rendezvous/round/keys.h"

namespace accel::launcher {

bool TcpStoreHost::waiting(const std::string& presenceKey, std::chrono::milliseconds grace) const {
  return server_.waiting(JobKeys::stored(presenceKey), grace);
}

size_t TcpStoreHost::presentCount() const { return server_.presentCount(); }

bool TcpStoreHost::awaitPresentAtMost(size_t count, std::chrono::milliseconds timeout) const {
  return server_.awaitPresentAtMost(count, timeout);
}

// The server counts the WAITs parked under its tracked prefix: the agents' failure watches.
bool TcpStoreHost::awaitWatches(size_t count, std::chrono::milliseconds timeout) const {
  return server_.awaitStats(
      [count](const store::TcpStoreServerStats& st) { return st.tracked_waiters >= count; },
      timeout);
}

size_t TcpStoreHost::clearKeysExcept(const std::vector<std::string>& keep) {
  std::vector<std::string> stored;
  for (const auto& k : keep) stored.push_back(JobKeys::stored(k));
  return server_.clearKeysExcept(stored);
}

int64_t TcpStoreHost::keepAlives(const std::string& key) const {
  return keep_alives_->count(JobKeys::stored(key));
}

store::TcpStoreServerOptions::ObservedKeys KeepAliveBoard::observer(const std::string& runId) {
  return {JobKeys::stored(JobKeys(runId).prefix()),
          [this](const std::string& key, const std::string& value) {
            if (key.find("/alive/") == std::string::npos) return;
            const int64_t count = std::strtoll(value.c_str(), nullptr, 10);
            std::lock_guard lock(mutex_);
            counts_[key] = count;
          }};
}

int64_t KeepAliveBoard::count(const std::string& storedKey) const {
  std::lock_guard lock(mutex_);
  auto it = counts_.find(storedKey);
  return it == counts_.end() ? 0 : it->second;
}

}  // namespace accel::launcher
