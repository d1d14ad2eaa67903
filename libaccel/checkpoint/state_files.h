#pragma once
// The files of a checkpoint, encoded to and decoded from bytes in memory, so that every write
// goes through checkpoint::writeFile (checked, fsynced) and every decoding error names its
// file. Internal to libaccel. Not thread-safe (LibTorch's serializers are not either).

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

namespace accel::checkpoint {

// model.pt, optimizer.pt, random_states_<rank>.pt: LibTorch archives (torch::save's format).
std::string encodeModule(const torch::nn::Module& module);
std::string encodeOptimizer(const torch::optim::Optimizer& optimizer);
std::string encodeTensor(const at::Tensor& tensor);

// Reads `path` into `archive`. Throws accel::Error naming the file when it is missing, torn or
// not a LibTorch archive.
void readArchive(const std::filesystem::path& path, torch::serialize::InputArchive& archive);
// A tensor written by encodeTensor; errors as readArchive.
at::Tensor readTensor(const std::filesystem::path& path);

// A JSON object; throws accel::Error naming the file when it is missing or not a JSON object.
nlohmann::json readJson(const std::filesystem::path& path);
// `object[key]` as T; throws accel::Error naming the file and the key when it is absent or of
// another type.
template <typename T>
T field(const nlohmann::json& object, const char* key, const std::filesystem::path& path);

}  // namespace accel::checkpoint
