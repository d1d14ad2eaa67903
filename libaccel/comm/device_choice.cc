#include "libaccel/comm/device_choice.h"

#include <torch/cuda.h>

#include "accel/error.h"
#include "libaccel/common/env_names.h"
#include "libaccel/common/env_values.h"

namespace accel::comm {

DeviceChoice chooseDevice(const DeviceFacts& facts) {
  DeviceChoice choice;
  if (facts.visible_devices <= 0) {
    choice.why_cpu = "no CUDA device is visible to this LibTorch";
    return choice;
  }
  if (facts.cpu_asked) {
    choice.why_cpu = "the CPU was asked for (--cpu)";
    return choice;
  }
  if (facts.world_size > 1 && !facts.nccl_built) {
    choice.why_cpu =
        "libaccel was built without NCCL, so ranks cannot exchange CUDA tensors (rebuild with "
        "-DACCEL_WITH_NCCL=ON)";
    return choice;
  }
  const std::string visible =
      facts.visible_list.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + facts.visible_list + ")";
  if (facts.local_rank >= facts.visible_devices) {
    throw Error("LOCAL_RANK=" + std::to_string(facts.local_rank) + " but only " +
                std::to_string(facts.visible_devices) + " CUDA device" +
                (facts.visible_devices == 1 ? " is" : "s are") + " visible to this rank" + visible +
                "; each rank trains on cuda:LOCAL_RANK among the GPUs it sees: start " +
                "fewer processes per machine (--num_processes), give each its own GPU " +
                "(--virtual_local_rank), or train on the CPU (--cpu)");
  }
  // Every rank of the machine sees the same GPUs only when nothing narrowed them: then more
  // ranks than GPUs is the launch's mistake, said on every rank. With a list (set per rank by
  // --virtual_local_rank or a scheduler's one GPU per task) only the rank's own index counts.
  const int ranksHere = std::max(facts.local_world_size, facts.local_rank + 1);
  if (facts.visible_list.empty() && ranksHere > facts.visible_devices) {
    throw Error(
        std::to_string(ranksHere) +
        " ranks run on this machine (LOCAL_WORLD_SIZE=" + std::to_string(facts.local_world_size) +
        ", LOCAL_RANK=" + std::to_string(facts.local_rank) + ") but only " +
        std::to_string(facts.visible_devices) + " CUDA device" +
        (facts.visible_devices == 1 ? " is" : "s are") + " visible" + visible +
        "; each rank needs its own GPU: start at most " + std::to_string(facts.visible_devices) +
        " processes per machine (--num_processes), or train on the CPU (--cpu)");
  }
  choice.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(facts.local_rank));
  return choice;
}

DeviceFacts deviceFactsFromEnvironment(bool cpuAsked) {
  DeviceFacts facts;
  facts.cpu_asked = cpuAsked;
  facts.visible_devices = static_cast<int>(torch::cuda::device_count());
  facts.local_rank = std::max(env::getInt(env::kLocalRank, 0), 0);
  facts.local_world_size = std::max(env::getInt(env::kLocalWorldSize, 1), 1);
  facts.world_size = std::max(env::getInt(env::kWorldSize, 1), 1);
#ifdef ACCEL_HAVE_NCCL
  facts.nccl_built = true;
#endif
  facts.visible_list = env::getString(env::kCudaVisibleDevices).value_or("");
  return facts;
}

}  // namespace accel::comm
