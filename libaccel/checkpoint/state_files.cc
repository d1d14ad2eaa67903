#include "libaccel/checkpoint/state_files.h"

#include <sstream>

#include <torch/serialize.h>
#include <torch/serialize/output-archive.h>

#include "accel/error.h"
#include "libaccel/checkpoint/staged_dir.h"

namespace fs = std::filesystem;

namespace accel::checkpoint {
namespace {

std::string bytesOf(torch::serialize::OutputArchive& archive) {
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

}  // namespace

std::string encodeModule(const torch::nn::Module& module) {
  torch::serialize::OutputArchive archive;
  module.save(archive);
  return bytesOf(archive);
}

std::string encodeOptimizer(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  return bytesOf(archive);
}

std::string encodeTensor(const at::Tensor& tensor) {
  std::ostringstream out;
  torch::save(tensor, out);
  return out.str();
}

void readArchive(const fs::path& path, torch::serialize::InputArchive& archive,
                 const torch::Device& device) {
  std::istringstream in(readFile(path));
  try {
    archive.load_from(in, device);
  } catch (const std::exception& e) {
    throw Error("checkpoint file '" + path.string() +
                "' is torn or not a LibTorch archive: " + e.what());
  }
}

std::vector<std::string> rngFilesToWrite(int rank, bool onCuda) {
  std::vector<std::string> files{"random_states_" + std::to_string(rank) + ".pt"};
  if (onCuda) files.push_back("cuda_random_states_" + std::to_string(rank) + ".pt");
  return files;
}

std::vector<std::string> rngFilesToRead(int rank, int savedProcesses, bool savedDeviceRng,
                                        bool onCuda) {
  if (rank >= savedProcesses) return {};
  return rngFilesToWrite(rank, onCuda && savedDeviceRng);
}

at::Tensor readTensor(const fs::path& path) {
  std::istringstream in(readFile(path));
  at::Tensor tensor;
  try {
    torch::load(tensor, in);
  } catch (const std::exception& e) {
    throw Error("checkpoint file '" + path.string() +
                "' is torn or not a LibTorch tensor: " + e.what());
  }
  return tensor;
}

nlohmann::json readJson(const fs::path& path) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(readFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint file '" + path.string() + "' is not valid JSON: " + e.what());
  }
  if (!value.is_object())
    throw Error("checkpoint file '" + path.string() + "' does not hold a JSON object");
  return value;
}

template <typename T>
T field(const nlohmann::json& object, const char* key, const fs::path& path) {
  try {
    return object.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint file '" + path.string() + "': bad or missing '" + key +
                "': " + e.what());
  }
}

template int64_t field<int64_t>(const nlohmann::json&, const char*, const fs::path&);
template int field<int>(const nlohmann::json&, const char*, const fs::path&);
template double field<double>(const nlohmann::json&, const char*, const fs::path&);
template bool field<bool>(const nlohmann::json&, const char*, const fs::path&);

}  // namespace accel::checkpoint
