#include "launcher/rendezvous/group_store.h"

#include "launcher/rendezvous/job_keys.h"
#include "libaccel/store/tcp_store_client.h"
#include "libaccel/store/tcp_store_server.h"

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

// The master's own store is up before it connects: only the route to name is asked for.
Expected<std::optional<probes::Route>> TcpGroupStore::reach(std::chrono::milliseconds timeout,
                                                            std::chrono::milliseconds progressEvery,
                                                            const Notify& progress) {
  if (store_host_) {
    auto route = probes::routeTo(host_);
    return route ? std::optional<probes::Route>(*route) : std::nullopt;
  }
  auto reached =
      probes::waitForListener(host_, port_, timeout, progressEvery, progress, address_flag_);
  if (!reached) return makeError(reached.error());
  return std::optional<probes::Route>(*reached);
}

std::unique_ptr<LinkStore> TcpGroupStore::connect(std::chrono::milliseconds timeout) {
  store::TcpStoreClientOptions options;
  options.host = host_;
  options.port = port_;
  options.connect_timeout = timeout;
  return std::make_unique<TcpLinkStore>(std::make_unique<store::TcpStoreClient>(options));
}

}  // namespace accel::launcher
