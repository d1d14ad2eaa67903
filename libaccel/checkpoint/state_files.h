#pragma once
// The files of a checkpoint, encoded to and decoded from bytes in memory, so that every write
// goes through checkpoint::writeFile (checked, fsynced) and every decoding error names its
// file. Internal to libaccel. Not thread-safe (LibTorch's serializers are not either).

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

namespace accel::checkpoint {

// model.pt, optimizer.pt, random_states_<rank>.pt: LibTorch archives (torch::save's format).
std::string encodeModule(const torch::nn::Module& module);
std::string encodeOptimizer(const torch::optim::Optimizer& optimizer);
std::string encodeTensor(const at::Tensor& tensor);

// Reads `path` into `archive`, its tensors onto `device` (where the model and optimizer live:
// loading a CPU tensor into a CUDA parameter would move the parameter). Throws accel::Error
// naming the file when it is missing, torn or not a LibTorch archive.
void readArchive(const std::filesystem::path& path, torch::serialize::InputArchive& archive,
                 const torch::Device& device = torch::kCPU);
// A tensor written by encodeTensor; errors as readArchive.
at::Tensor readTensor(const std::filesystem::path& path);

// The random-number states of rank `rank`: random_states_<rank>.pt (the CPU generator) and,
// training on CUDA, cuda_random_states_<rank>.pt (its device's generator).
std::vector<std::string> rngFilesToWrite(int rank, bool onCuda);
// What rank `rank` restores from a checkpoint of `savedProcesses` ranks (`savedDeviceRng`: they
// trained on CUDA), training on CUDA when `onCuda`: nothing for a rank the saving job did not
// have (it keeps its own seed), the device's file only when both sides are on CUDA (a CPU
// checkpoint loaded on a GPU keeps the device's seeded state; a GPU one loaded on the CPU has no
// device to restore). In rngFilesToWrite's order.
std::vector<std::string> rngFilesToRead(int rank, int savedProcesses, bool savedDeviceRng,
                                        bool onCuda);

// A JSON object; throws accel::Error naming the file when it is missing or not a JSON object.
nlohmann::json readJson(const std::filesystem::path& path);
// `object[key]` as T; throws accel::Error naming the file and the key when it is absent or of
// another type.
template <typename T>
T field(const nlohmann::json& object, const char* key, const std::filesystem::path& path);

}  // namespace accel::checkpoint
