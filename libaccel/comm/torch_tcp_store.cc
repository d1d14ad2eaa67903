#include "libaccel/comm/torch_tcp_store.h"

#include <torch/version.h>

namespace accel::comm {

c10::intrusive_ptr<c10d::TCPStore> makeTorchTcpStore(const std::string& host,
                                                     c10d::TCPStoreOptions options) {
#if TORCH_VERSION_MAJOR >= 2
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("libuv") == std::string::npos) throw;
    options.useLibUV = false;
  }
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

}  // namespace accel::comm
