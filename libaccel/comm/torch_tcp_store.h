#pragma once
// LibTorch's own c10d::TCPStore, made so that it works on every LibTorch libaccel builds
// against: torch 2.x defaults to its libuv backend and checks for it even in clients; a
// LibTorch built without libuv (Debian's 2.x) then gets the legacy backend, which speaks the
// same bytes. Blocks like the TCPStore constructor (connects, and serves when options.isServer);
// throws what it throws (c10::Error).

#include <string>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace accel::comm {

c10::intrusive_ptr<c10d::TCPStore> makeTorchTcpStore(const std::string& host,
                                                     c10d::TCPStoreOptions options);

}  // namespace accel::comm
