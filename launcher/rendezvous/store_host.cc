#include "launcher/rendezvous/store_host.h"

#include "launcher/rendezvous/round/keys.h"
#include "launcher/store/tcp_store_server.h"

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

}  // namespace accel::launcher
