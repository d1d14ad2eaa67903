#pragma once
// Which device a rank trains on, decided once for the communicator and the Accelerator alike:
// cuda:LOCAL_RANK (an index among the GPUs CUDA_VISIBLE_DEVICES leaves visible, as accelerate's
// `torch.device("cuda", local_process_index)`) when a GPU is visible, the CPU was not asked for
// and the ranks can exchange device tensors (NCCL was built, or the job is one process); the CPU
// otherwise.

#include <string>

#include <c10/core/Device.h>

namespace accel::comm {

struct DeviceFacts {
  bool cpu_asked = false;   // --cpu, ACCELERATE_USE_CPU, AcceleratorOptions::cpu
  int visible_devices = 0;  // what CUDA counts (0 with a CPU-only LibTorch)
  int local_rank = 0;
  int local_world_size = 1;
  int world_size = 1;
  bool nccl_built = false;
  std::string visible_list;  // $CUDA_VISIBLE_DEVICES, for messages ("" when unset)
};

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  std::string why_cpu;  // with the CPU: why, for messages ("no CUDA device is visible ...")
};

// Throws accel::Error when a GPU would be used but LOCAL_RANK has no GPU among those this rank
// sees, or — when every rank sees all of the machine's GPUs (CUDA_VISIBLE_DEVICES unset) — the
// machine runs more ranks than it has GPUs (NCCL puts one rank on one device); the message names
// the counts and what to change. A rank given its own list (--virtual_local_rank: LOCAL_RANK=0
// and one GPU; a scheduler's GPU per task) is not compared with LOCAL_WORLD_SIZE.
DeviceChoice chooseDevice(const DeviceFacts& facts);

// The facts of this process: $LOCAL_RANK, $LOCAL_WORLD_SIZE, $WORLD_SIZE, $CUDA_VISIBLE_DEVICES
// and LibTorch's count of CUDA devices.
DeviceFacts deviceFactsFromEnvironment(bool cpuAsked);

}  // namespace accel::comm
