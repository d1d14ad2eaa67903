#pragma once
// The default ports of the job's store, as torch and accelerate choose them.

namespace accel::launcher {

// MASTER_PORT when a multi-machine job gives none: torchrun's static rendezvous and
// accelerate's default main_process_port.
inline constexpr int kDefaultMasterPort = 29500;
// The port of a --rdzv_endpoint without one: torch's c10d rendezvous backend's default.
inline constexpr int kDefaultC10dPort = 29400;

}  // namespace accel::launcher
