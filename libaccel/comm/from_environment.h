#pragma once
// The process group of `accel launch`'s (or torchrun's) workers, from their environment: the
// job's store (the agent's, namespaced per restart attempt as torch does, or rank 0's without
// an agent), then the communicator:
//   - NCCL when the rank trains on a GPU (device_choice.h: built with NCCL, a GPU visible per
//     local rank, not CPU-only; more local ranks than GPUs is an error);
//   - else, on the CPU, shared memory (shm_communicator.h) when every rank runs on this machine
//     (WORLD_SIZE == LOCAL_WORLD_SIZE); with several machines of LOCAL_WORLD_SIZE > 1 ranks each,
//     shared memory inside each machine and Gloo between them (hierarchical_communicator.h);
//     Gloo otherwise, or when ACCEL_CPU_BACKEND=gloo.
// Blocks while the group forms (at most options.timeout). Throws accel::Error on a bad
// environment (naming the variable), accel::NetworkError when the store cannot be reached.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "accel/communicator.h"

namespace accel::shm {
enum class Stores : uint8_t;  // shm_group.h
}  // namespace accel::shm

namespace accel::comm {

struct EnvironmentOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  bool cpu_only = false;
  std::optional<CpuBackend> cpu_backend;  // else $ACCEL_CPU_BACKEND (auto, shm, gloo), else auto
};

std::shared_ptr<Communicator> communicatorFromEnvironment(const EnvironmentOptions& options);

// $ACCEL_CPU_BACKEND parsed; Auto when unset. Throws accel::Error naming the variable and the
// values it takes.
CpuBackend cpuBackendFromEnvironment();

// $ACCEL_SHM_STORES parsed (auto, plain, streaming: shm_group.h's Stores); Auto when unset.
// Throws accel::Error naming the variable and the values it takes.
shm::Stores shmStoresFromEnvironment();

}  // namespace accel::comm
