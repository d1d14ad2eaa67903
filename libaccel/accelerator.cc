#include "accel/accelerator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>

#include <ATen/autocast_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/version.h>

#include "accel/error.h"
#include "libaccel/checkpoint/staged_dir.h"
#include "libaccel/checkpoint/state_files.h"
#include "libaccel/comm/device_choice.h"
#include "libaccel/comm/from_environment.h"
#include "libaccel/common/env_names.h"
#include "libaccel/common/env_values.h"
#include "libaccel/common/stack_dump.h"
#include "libaccel/optim/foreach_adam.h"
#include "libaccel/store/heartbeat.h"
#include "libaccel/sync/gradient_sync.h"

namespace accel {
namespace {

GradientCompression compressionFromEnvironment() {
  const std::string v = env::getString(env::kGradientCompression).value_or("none");
  if (v == "none") return GradientCompression::None;
  if (v == "bf16") return GradientCompression::Bf16;
  throw Error(std::string(env::kGradientCompression) + "='" + v + "' is not one of none, bf16");
}

bool bucketViewsFromEnvironment() {
  const std::string v = env::getString(env::kGradientAsBucketView).value_or("1");
  if (v == "1") return true;
  if (v == "0") return false;
  throw Error(std::string(env::kGradientAsBucketView) + "='" + v + "' is not 0 or 1");
}

MixedPrecision parsePrecision(const std::string& text) {
  if (text == "no") return MixedPrecision::No;
  if (text == "bf16") return MixedPrecision::Bf16;
  if (text == "fp16") return MixedPrecision::Fp16;
  throw Error(std::string(env::kMixedPrecision) + "='" + text + "' is not one of no, fp16, bf16");
}

// A collective's result on the host. On CUDA the host first waits for the communicator (so a
// collective the watchdog aborted throws its error here, never yields garbage), then copies.
at::Tensor readOnHost(Communicator& comm, const at::Tensor& tensor) {
  comm.synchronize();
  return tensor.cpu();
}

// LibTorch's optimizers keep their state per parameter in types of their own (SGD's momentum,
// Adam's moments); a round trip through their archive, loaded onto `device`, moves all of it.
void moveOptimizerState(torch::optim::Optimizer& optimizer, const torch::Device& device) {
  if (optimizer.state().empty()) return;
  const std::string bytes = checkpoint::encodeOptimizer(optimizer);
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size(), device);
  optimizer.load(archive);
}

// Runs this rank's part of a collective operation and tells every rank whether every part
// succeeded: "" when they did, else this rank's own error, or which ranks failed.
std::string agreeOnSuccess(Communicator& comm, const std::string& what,
                           const std::function<void()>& part) {
  std::string mine;
  try {
    part();
  } catch (const std::exception& e) {
    mine = e.what();
  }
  const at::Tensor flags = readOnHost(
      comm, at::cat(comm.allgather(at::full({1}, mine.empty() ? 0 : 1,
                                            at::TensorOptions(at::kInt).device(comm.device())))));
  if (!mine.empty()) return mine;
  std::string failed;
  for (int64_t r = 0; r < flags.numel(); ++r) {
    if (flags[r].item<int>() != 0) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  }
  return failed.empty() ? ""
                        : what + " failed on rank(s) " + failed +
                              " (see their errors); nothing was changed here";
}

// A name for this save's staging directory that every rank agrees on.
uint64_t agreeOnToken(Communicator& comm) {
  at::Tensor token = at::zeros({1}, at::TensorOptions(at::kLong).device(comm.device()));
  if (comm.rank() == 0) {
    std::random_device random;
    const uint64_t bits =
        (static_cast<uint64_t>(random()) << 32) ^ random() ^ static_cast<uint64_t>(::getpid());
    token.fill_(static_cast<int64_t>(bits >> 1));
  }
  comm.broadcast(token, 0);
  return static_cast<uint64_t>(readOnHost(comm, token).item<int64_t>());
}

}  // namespace

// torch 2.4 made autocast's state per device type (is_autocast_enabled(kCPU), ...) and
// deprecated the per-backend functions that 1.13 only has; use whichever this LibTorch offers.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
namespace {
bool autocastEnabled(bool cuda) {
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
}
at::ScalarType autocastDtype(bool cuda) {
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
}
void setAutocast(bool cuda, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
}
}  // namespace
#else
namespace {
bool autocastEnabled(bool cuda) {
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
at::ScalarType autocastDtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void setAutocast(bool cuda, bool enabled, at::ScalarType dtype) {
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
}
}  // namespace
#endif

AutocastGuard::AutocastGuard(bool enabled, at::ScalarType dtype, bool cuda)
    : enabled_(enabled), cuda_(cuda) {
  if (!enabled_) return;
  previous_enabled_ = autocastEnabled(cuda_);
  previous_dtype_ = autocastDtype(cuda_);
  setAutocast(cuda_, true, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  setAutocast(cuda_, previous_enabled_, previous_dtype_);
}

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)), scaler_(options_.scaler) {
  mixed_precision_ = options_.mixed_precision
                         ? *options_.mixed_precision
                         : parsePrecision(env::getString(env::kMixedPrecision).value_or("no"));
  accumulation_steps_ = options_.gradient_accumulation_steps
                            ? *options_.gradient_accumulation_steps
                            : env::getInt(env::kGradientAccumulationSteps, 1);
  compression_ = options_.gradient_compression.value_or(compressionFromEnvironment());
  ACCEL_CHECK(accumulation_steps_ >= 1, "gradient_accumulation_steps must be at least 1, not ",
              accumulation_steps_);
  const bool cpuOnly =
      options_.cpu.value_or(env::getString(env::kUseCpu).value_or("False") == "True");
  if (options_.communicator) comm_ = options_.communicator;
  local_rank_ = options_.local_rank >= 0
                    ? options_.local_rank
                    : env::getInt(env::kLocalRank, options_.communicator ? comm_->rank() : 0);
  device_ = chooseDevice(cpuOnly);
  // The rank's GPU becomes the process's current device before the communicator is made (as
  // accelerate's torch.cuda.set_device): the communicator's allocations, and the user's tensors
  // made with torch::kCUDA, land on it rather than all on GPU 0.
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->setDevice(device_);
  if (!comm_) {
    comm::EnvironmentOptions e;
    e.timeout = options_.timeout;
    e.cpu_only = cpuOnly;
    e.cpu_backend = options_.cpu_backend;
    comm_ = comm::communicatorFromEnvironment(e);
  }
  // fp16 on the CPU would silently train in fp32 (accelerate's behaviour), which accel refuses.
  if (mixed_precision_ == MixedPrecision::Fp16 && !device_.is_cuda()) {
    throw Error("mixed precision fp16 needs a CUDA device and this process trains on the CPU (" +
                why_cpu_ + "); use bf16 or no");
  }
  scaler_ = GradScaler([&] {
    GradScalerOptions o = options_.scaler;
    o.enabled = o.enabled && mixed_precision_ == MixedPrecision::Fp16;
    return o;
  }());
  // Under accel launch: progress for `accel status` and --hang_timeout, and a stack to show if
  // the agent finds this rank hung.
  heartbeat_ = store::Heartbeat::fromEnvironment();
  installStackDumpOnAbort();
}

Accelerator::~Accelerator() = default;

// A communicator given in code decides (its device); else device_choice.h's rule, the one the
// communicator from the environment followed. GPUs left unused get one line on stderr.
torch::Device Accelerator::chooseDevice(bool cpuOnly) {
  if (options_.communicator) {
    if (!comm_->device().is_cuda()) why_cpu_ = "the communicator given in code works on the CPU";
    return comm_->device();
  }
  const comm::DeviceFacts facts = comm::deviceFactsFromEnvironment(cpuOnly);
  const comm::DeviceChoice choice = comm::chooseDevice(facts);
  why_cpu_ = choice.why_cpu;
  if (!choice.device.is_cuda() && facts.visible_devices > 0 && !cpuOnly && local_rank_ == 0)
    std::cerr << "accel: training on the CPU although CUDA devices are visible: " << why_cpu_
              << "\n";
  return choice.device;
}

void Accelerator::prepare(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  ACCEL_CHECK(!model_, "prepare() was already called");
  model.to(device_);
  moveOptimizerState(optimizer, device_);
  model_ = &model;
  optimizer_ = &optimizer;
  torch::NoGradGuard noGrad;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  for (auto& item : model.named_parameters()) {
    names.push_back(item.key());
    params.push_back(item.value());
  }
  if (numProcesses() > 1) {
    for (auto& p : params) {
      at::Tensor data = p.detach();
      comm_->broadcast(data, 0);
    }
    for (auto& b : model.buffers()) {
      at::Tensor data = b.detach();
      comm_->broadcast(data, 0);
    }
    sync::GradientSyncOptions so;
    so.bucket_cap_bytes = options_.bucket_cap_bytes;
    so.find_unused_parameters = options_.find_unused_parameters;
    so.bf16_compression = compression_ == GradientCompression::Bf16;
    so.gradient_as_bucket_view =
        options_.gradient_as_bucket_view.value_or(bucketViewsFromEnvironment());
    grad_sync_ = std::make_unique<sync::GradientSync>(*comm_, params, names, so);
    applyGradientSyncState();
  }
}

bool Accelerator::accumulate(bool lastBatch) {
  ++micro_step_;
  sync_gradients_ = lastBatch || micro_step_ % accumulation_steps_ == 0;
  if (lastBatch) micro_step_ = 0;
  applyGradientSyncState();
  return sync_gradients_;
}

void Accelerator::applyGradientSyncState() {
  if (grad_sync_) grad_sync_->setEnabled(sync_gradients_ && !no_sync_);
}

NoSyncGuard::NoSyncGuard(Accelerator& acc) : acc_(acc), previous_(acc.no_sync_) {
  acc_.no_sync_ = true;
  acc_.applyGradientSyncState();
}

NoSyncGuard::~NoSyncGuard() {
  acc_.no_sync_ = previous_;
  acc_.applyGradientSyncState();
}

AutocastGuard Accelerator::autocast() const {
  const bool on = mixed_precision_ != MixedPrecision::No;
  return AutocastGuard(on, mixed_precision_ == MixedPrecision::Fp16 ? at::kHalf : at::kBFloat16,
                       device_.is_cuda());
}

void Accelerator::backward(const at::Tensor& loss) {
  // The heartbeat counts the steps whose gradients this rank begins to synchronise: a rank
  // stuck before them is a step behind the ranks waiting for it.
  if (heartbeat_ && sync_gradients_) beat();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  at::Tensor l = accumulation_steps_ > 1 ? loss / accumulation_steps_ : loss;
  if (grad_sync_) grad_sync_->rehook();
  scaler_.scale(l).backward();
  if (profile_) profile_->mark(StepPhase::Backward);
  const auto backwardDone = Clock::now();
  step_times_.backward = std::chrono::duration<double>(backwardDone - start).count();
  step_times_.sync = 0;
  if (grad_sync_ && sync_gradients_ && !no_sync_) {
    grad_sync_->finish();
    if (profile_) profile_->mark(StepPhase::Sync);
    step_times_.sync = std::chrono::duration<double>(Clock::now() - backwardDone).count();
  }
  if (grad_sync_) waited_ += grad_sync_->takeCommTime();
}

void Accelerator::countWait(std::chrono::steady_clock::time_point since) {
  waited_ += std::chrono::steady_clock::now() - since;
}

// A step's own work is what is left of its wall time once the waits in collectives are taken out:
// in lock-step every rank's step takes as long as the slowest's, and the others wait that
// difference in the all-reduce; the agent compares the ranks' work (straggler scores). The first
// step has no step before it to measure.
void Accelerator::beat() {
  const auto now = std::chrono::steady_clock::now();
  int64_t work = 0;
  if (last_beat_ != std::chrono::steady_clock::time_point{}) {
    work =
        std::chrono::duration_cast<std::chrono::microseconds>(now - last_beat_ - waited_).count();
  }
  heartbeat_->beat(std::max<int64_t>(work, 0));
  last_beat_ = now;
  waited_ = {};
}

std::vector<at::Tensor> Accelerator::gradients() const {
  std::vector<at::Tensor> out;
  if (!model_) return out;
  for (const auto& p : model_->parameters()) {
    if (p.grad().defined()) out.push_back(p.grad());
  }
  return out;
}

bool Accelerator::step() {
  ACCEL_CHECK(optimizer_, "step() before prepare()");
  step_skipped_ = false;
  step_times_.optimizer = 0;
  if (!sync_gradients_) return false;
  const auto start = std::chrono::steady_clock::now();
  if (scaler_.enabled()) {
    if (!unscaled_) {
      found_inf_ = scaler_.unscale(gradients(), *comm_);
      countWait(start);
    }
    step_skipped_ = found_inf_;
    if (!found_inf_) stepOptimizer();
    scaler_.update(found_inf_);
  } else {
    stepOptimizer();
  }
  unscaled_ = false;
  found_inf_ = false;
  clearGradients();
  if (!step_skipped_) ++optimizer_steps_;
  if (profile_) profile_->mark(StepPhase::Optimizer);
  step_times_.optimizer =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return !step_skipped_;
}

void Accelerator::stepOptimizer() {
  const bool foreach = options_.foreach_optimizer.value_or(device_.is_cuda());
  if (!foreach || !optim::foreachAdamStep(*optimizer_)) optimizer_->step();
}

// zero_grad(set_to_none=True), torch 2.x's default in Python and C++ (LibTorch 1.13's C++
// zero_grad() zeroes in place instead): the next backward then stores each gradient as it
// comes, without adding it to zeros, and the sync writes the average in one pass. With gradients
// as bucket views, the synced ones are zeroed in their buckets instead (one pass per bucket), so
// that the next backward accumulates there.
void Accelerator::clearGradients() {
  for (auto& group : optimizer_->param_groups()) {
    for (auto& p : group.params()) p.mutable_grad().reset();
  }
  if (grad_sync_) grad_sync_->zeroGradients();
}

double Accelerator::clipGradNorm(double maxNorm, double normType) {
  ACCEL_CHECK(model_, "clipGradNorm() before prepare()");
  if (scaler_.enabled() && !unscaled_) {
    const auto start = std::chrono::steady_clock::now();
    found_inf_ = scaler_.unscale(gradients(), *comm_);
    countWait(start);
    unscaled_ = true;
  }
  return torch::nn::utils::clip_grad_norm_(model_->parameters(), maxNorm, normType);
}

at::Tensor Accelerator::gather(const at::Tensor& tensor) {
  at::Tensor t = tensor.dim() == 0 ? tensor.unsqueeze(0) : tensor;
  if (numProcesses() == 1) return t.clone();
  const auto start = std::chrono::steady_clock::now();
  at::Tensor all = at::cat(comm_->allgather(t.contiguous()), 0);
  countWait(start);
  return all;
}

at::Tensor Accelerator::gatherForMetrics(const at::Tensor& tensor,
                                         const ShardedBatchSampler& sampler, bool lastBatch) {
  at::Tensor all = gather(tensor);
  const size_t keep = sampler.remainder();
  if (lastBatch && keep > 0 && static_cast<int64_t>(keep) < all.size(0))
    return all.narrow(0, 0, static_cast<int64_t>(keep));
  return all;
}

at::Tensor Accelerator::reduce(const at::Tensor& tensor, Reduction reduction) {
  at::Tensor t = tensor.clone();
  const auto start = std::chrono::steady_clock::now();
  comm_->allreduce(t, ReduceOp::Sum);
  countWait(start);
  if (reduction == Reduction::Mean) t.div_(numProcesses());
  return t;
}

void Accelerator::broadcast(at::Tensor& tensor, int fromProcess) {
  const auto start = std::chrono::steady_clock::now();
  comm_->broadcast(tensor, fromProcess);
  countWait(start);
}

at::Tensor Accelerator::padAcrossProcesses(const at::Tensor& tensor, int64_t dim, double padIndex,
                                           bool padFirst) {
  ACCEL_CHECK(dim >= 0 && dim < tensor.dim(), "padAcrossProcesses: dim ", dim,
              " is out of range for a ", tensor.dim(), "-d tensor");
  at::Tensor size =
      at::full({1}, tensor.size(dim), at::TensorOptions(at::kLong).device(comm_->device()));
  comm_->allreduce(size, ReduceOp::Max);
  const int64_t target = readOnHost(*comm_, size).item<int64_t>();
  if (target == tensor.size(dim)) return tensor;
  auto shape = tensor.sizes().vec();
  shape[static_cast<size_t>(dim)] = target;
  at::Tensor out = at::full(shape, padIndex, tensor.options());
  const int64_t offset = padFirst ? target - tensor.size(dim) : 0;
  out.narrow(dim, offset, tensor.size(dim)).copy_(tensor);
  return out;
}

void Accelerator::print(const std::string& text) const {
  if (isMainProcess()) std::cout << text << std::endl;
}

void Accelerator::mainProcessFirst(const std::function<void()>& fn) {
  if (!isMainProcess()) waitForEveryone();
  fn();
  if (isMainProcess()) waitForEveryone();
}

void Accelerator::setSeed(uint64_t seed, bool deviceSpecific) {
  torch::manual_seed(seed + (deviceSpecific ? static_cast<uint64_t>(processIndex()) : 0));
}

// Checkpoints. saveState is a collective in two phases, each ended by agreeing on success:
// every rank writes its part into the staged directory, then one rank per file system
// publishes it. A failure anywhere leaves the previous checkpoint as it was, and every rank
// throws.
void Accelerator::saveState(const std::string& dir) {
  ACCEL_CHECK(model_ && optimizer_, "saveState() before prepare()");
  checkpoint::StagedDir staged(dir, agreeOnToken(*comm_));
  std::string failure = agreeOnSuccess(*comm_, "saveState('" + dir + "')", [&] {
    staged.create();
    writeOwnFiles(staged);
  });
  if (failure.empty()) {
    failure = agreeOnSuccess(*comm_, "saveState('" + dir + "')", [&] {
      if (staged.claim()) staged.publish();
    });
  }
  staged.cleanUp();
  if (!failure.empty()) throw Error(failure);
}

void Accelerator::writeOwnFiles(const checkpoint::StagedDir& staged) const {
  if (isMainProcess()) {
    const std::string model = checkpoint::encodeModule(*model_),
                      optimizer = checkpoint::encodeOptimizer(*optimizer_);
    staged.write("model.pt", model);
    staged.write("optimizer.pt", optimizer);
    staged.write("scaler.json", nlohmann::json{{"scale", scaler_.currentScale()},
                                               {"growth_tracker", scaler_.growthTracker()}}
                                    .dump(2));
    // Written last: the sizes let loadState tell a torn file from one that is merely corrupt.
    staged.write(
        "accel_state.json",
        nlohmann::json{{"step", optimizer_steps_},
                       {"micro_step", micro_step_},
                       {"num_processes", numProcesses()},
                       {"device_rng", device_.is_cuda()},
                       {"sizes", {{"model.pt", model.size()}, {"optimizer.pt", optimizer.size()}}}}
            .dump(2));
  }
  const std::vector<std::string> rngFiles =
      checkpoint::rngFilesToWrite(processIndex(), device_.is_cuda());
  for (size_t k = 0; k < rngFiles.size(); ++k) {
    at::Generator generator = rngGenerator(k);
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    staged.write(rngFiles[k], checkpoint::encodeTensor(state));
  }
}

// The generator whose state rngFilesToWrite's file `index` holds: the CPU's, then the device's.
at::Generator Accelerator::rngGenerator(size_t index) const {
  return index == 0 ? at::detail::getDefaultCPUGenerator()
                    : at::globalContext().defaultGenerator(device_);
}

// Collective too: every rank reads and checks every file it needs before any state changes,
// and throws when any rank could not.
void Accelerator::loadState(const std::string& dir) {
  ACCEL_CHECK(model_ && optimizer_, "loadState() before prepare()");
  const std::string failure =
      agreeOnSuccess(*comm_, "loadState('" + dir + "')", [&] { loadOwnFiles(dir); });
  if (!failure.empty()) throw Error(failure);
}

void Accelerator::loadOwnFiles(const std::string& dir) {
  const std::filesystem::path root(dir), statePath = root / "accel_state.json";
  const nlohmann::json state = checkpoint::readJson(statePath);
  const int64_t step = checkpoint::field<int64_t>(state, "step", statePath);
  const int64_t microStep = checkpoint::field<int64_t>(state, "micro_step", statePath);
  const int savedProcesses = checkpoint::field<int>(state, "num_processes", statePath);
  if (state.contains("sizes")) {
    for (const char* name : {"model.pt", "optimizer.pt"}) {
      const auto expected = checkpoint::field<int64_t>(state.at("sizes"), name, statePath);
      std::error_code ec;
      const auto size = std::filesystem::file_size(root / name, ec);
      if (ec)
        throw Error("checkpoint file '" + (root / name).string() +
                    "' is missing or unreadable: " + ec.message());
      if (static_cast<int64_t>(size) != expected) {
        throw Error("checkpoint file '" + (root / name).string() +
                    "' is torn: " + std::to_string(size) + " bytes, the checkpoint recorded " +
                    std::to_string(expected));
      }
    }
  }
  torch::serialize::InputArchive model, optimizer;
  checkpoint::readArchive(root / "model.pt", model, device_);
  checkpoint::readArchive(root / "optimizer.pt", optimizer, device_);
  std::optional<std::pair<double, int>> scale;
  if (std::filesystem::exists(root / "scaler.json")) {
    const auto scaler = checkpoint::readJson(root / "scaler.json");
    scale.emplace(checkpoint::field<double>(scaler, "scale", root / "scaler.json"),
                  checkpoint::field<int>(scaler, "growth_tracker", root / "scaler.json"));
  }
  // A rank the saving job did not have starts from its own seed (loading on more processes).
  std::vector<at::Tensor> rng;
  const bool savedDeviceRng =
      state.contains("device_rng") && checkpoint::field<bool>(state, "device_rng", statePath);
  for (const auto& file : checkpoint::rngFilesToRead(processIndex(), savedProcesses, savedDeviceRng,
                                                     device_.is_cuda()))
    rng.push_back(checkpoint::readTensor(root / file));
  try {
    model_->load(model);
  } catch (const std::exception& e) {
    throw Error("checkpoint file '" + (root / "model.pt").string() +
                "' does not fit the model: " + e.what());
  }
  try {
    optimizer_->load(optimizer);
  } catch (const std::exception& e) {
    throw Error("checkpoint file '" + (root / "optimizer.pt").string() +
                "' does not fit the optimizer: " + e.what());
  }
  if (scale) scaler_.setState(scale->first, scale->second);
  optimizer_steps_ = step;
  micro_step_ = microStep;
  for (size_t k = 0; k < rng.size(); ++k) {
    at::Generator generator = rngGenerator(k);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rng[k]);
  }
}

}  // namespace accel
