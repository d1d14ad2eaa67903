#include "launcher/rendezvous/c10d/group_store.h"

#include <unistd.h>

#include <cerrno>

#include "libaccel/store/tcp_connect.h"
#include "libaccel/store/tcp_store_client.h"

namespace accel::launcher {

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

Knock TcpGroupStore::knock(std::chrono::milliseconds timeout) {
  std::string why;
  int error = 0;
  const int fd =
      store::connectTcp(host_, port_, std::chrono::steady_clock::now() + timeout, why, error);
  if (fd >= 0) {
    ::close(fd);
    return Knock::kAnswers;
  }
  return error == ECONNREFUSED ? Knock::kRefused : Knock::kSilent;
}

}  // namespace accel::launcher
