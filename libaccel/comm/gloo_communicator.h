#pragma once
// The CPU communicator: LibTorch's c10d ProcessGroupGloo over a c10d store.

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "accel/communicator.h"

namespace accel::comm {

struct GlooOptions {
  // Interface Gloo binds ($GLOO_SOCKET_IFNAME); empty: the address this host uses to reach
  // `peer_host` (loopback when the job is on one machine).
  std::string interface;
  std::string peer_host = "127.0.0.1";
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// Joins the group of `size` ranks through `store` (which namespaces the group's keys). Blocks
// until every rank joined, at most options.timeout, which also bounds every collective later.
// Throws accel::NetworkError when the group cannot be formed, accel::Error when no local
// address reaches `peer_host` — and always accel::Error, saying why, where libaccel was built
// against a LibTorch without Gloo's headers (pip's torch: ACCEL_HAVE_GLOO unset).
std::unique_ptr<Communicator> makeGlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, const GlooOptions& options);

// The local IP address the kernel would use to reach `host` (no packet is sent), or "" when
// `host` cannot be resolved.
std::string localAddressFor(const std::string& host);

}  // namespace accel::comm
