#include "accel/accelerator.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>

#include <ATen/autocast_mode.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/serialize.h>
#include <torch/version.h>

#include "libaccel/comm/gloo_communicator.h"
#include "libaccel/comm/torch_tcp_store.h"
#ifdef ACCEL_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "libaccel/comm/nccl_communicator.h"
#endif
#include "libaccel/common/env_names.h"
#include "accel/error.h"
#include "libaccel/sync/gradient_sync.h"

namespace accel {
namespace {

std::optional<std::string> getenvString(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int getenvInt(const char* name, int fallback) {
  auto v = getenvString(name);
  if (!v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v->c_str(), &end, 10);
  ACCEL_CHECK(*end == '\0', "environment variable ", name, "='", *v, "' is not an integer");
  return static_cast<int>(n);
}

MixedPrecision parsePrecision(const std::string& text) {
  if (text == "no") return MixedPrecision::No;
  if (text == "bf16") return MixedPrecision::Bf16;
  if (text == "fp16") return MixedPrecision::Fp16;
  throw Error(std::string(env::kMixedPrecision) + "='" + text + "' is not one of no, fp16, bf16");
}

// The process group of `accel launch`'s workers: the agent's store (namespaced per attempt,
// as torch does), and NCCL when it was built, a CUDA device is usable and the job is not
// CPU-only; Gloo otherwise.
std::shared_ptr<Communicator> communicatorFromEnvironment(std::chrono::milliseconds timeout, bool cpuOnly,
                                                          int localRank) {
  const int world = getenvInt(env::kWorldSize, 1);
  if (world <= 1) return makeSingleProcessCommunicator();
  const int rank = getenvInt(env::kRank, -1);
  ACCEL_CHECK(rank >= 0 && rank < world, env::kRank, " must be in [0, ", world, ") but is ", rank);
  auto addr = getenvString(env::kMasterAddr);
  auto port = getenvInt(env::kMasterPort, -1);
  ACCEL_CHECK(addr && port > 0, env::kMasterAddr, " and ", env::kMasterPort, " must be set when ", env::kWorldSize,
              " > 1 (run under accel launch)");
  // Under `accel launch` the agent hosts the store; without an agent (a rank per scheduler
  // task, --no_spawn) rank 0 hosts it, as in torch's env:// init.
  const bool agentStore = getenvString(env::kUseAgentStore).value_or("") == "True";
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = !agentStore && rank == 0;
  options.waitWorkers = false;
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = comm::makeTorchTcpStore(*addr, options);
  } catch (const std::exception& e) {
    throw NetworkError("rank " + std::to_string(rank) + ": cannot reach the job's store at " + *addr + ":" +
                       std::to_string(port) + ": " + e.what());
  }
  if (agentStore) {
    store = c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + getenvString(env::kRestartCount).value_or("0"), store);
  }
  store = c10::make_intrusive<c10d::PrefixStore>("accel", store);
#ifdef ACCEL_HAVE_NCCL
  // NCCL needs a device per local rank (it refuses two ranks on one GPU).
  if (!cpuOnly && comm::cudaUnavailableReason().empty()) {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (devices >= getenvInt(env::kLocalWorldSize, 1)) {
      return comm::makeNcclCommunicator(store, rank, world, std::max(localRank, 0), timeout);
    }
  }
#else
  (void)cpuOnly;
  (void)localRank;
#endif
  comm::GlooOptions gloo;
  gloo.interface = getenvString("GLOO_SOCKET_IFNAME").value_or("");
  gloo.peer_host = *addr;
  gloo.timeout = timeout;
  return comm::makeGlooCommunicator(store, rank, world, gloo);
}

void makeDirs(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty()) ::mkdir(partial.c_str(), 0755);
    }
    if (i < dir.size()) partial += dir[i];
  }
  struct stat st {};
  ACCEL_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "cannot create checkpoint directory '", dir, "'");
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

// torch 2.4 made autocast's state per device type (is_autocast_enabled(kCPU), ...) and
// deprecated the per-backend functions that 1.13 only has; use whichever this LibTorch offers.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
namespace {
bool autocastEnabled(bool cuda) { return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU); }
at::ScalarType autocastDtype(bool cuda) { return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU); }
void setAutocast(bool cuda, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
}
}  // namespace
#else
namespace {
bool autocastEnabled(bool cuda) { return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled(); }
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

AutocastGuard::AutocastGuard(bool enabled, at::ScalarType dtype, bool cuda) : enabled_(enabled), cuda_(cuda) {
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

Accelerator::Accelerator(AcceleratorOptions options) : options_(std::move(options)), scaler_(options_.scaler) {
  mixed_precision_ = options_.mixed_precision
                         ? *options_.mixed_precision
                         : parsePrecision(getenvString(env::kMixedPrecision).value_or("no"));
  accumulation_steps_ = options_.gradient_accumulation_steps
                            ? *options_.gradient_accumulation_steps
                            : getenvInt(env::kGradientAccumulationSteps, 1);
  ACCEL_CHECK(accumulation_steps_ >= 1, "gradient_accumulation_steps must be at least 1, not ", accumulation_steps_);
  // Debian's LibTorch has no CUDA, so the device is the CPU; fp16 would silently train in fp32
  // there (accelerate's behaviour), which accel refuses.
  if (mixed_precision_ == MixedPrecision::Fp16 && !torch::cuda::is_available()) {
    throw Error("mixed precision fp16 needs a CUDA device and this LibTorch has none; use bf16 or no");
  }
  const bool cpuOnly = options_.cpu.value_or(getenvString(env::kUseCpu).value_or("False") == "True");
  comm_ = options_.communicator ? options_.communicator
                                : communicatorFromEnvironment(options_.timeout, cpuOnly, getenvInt(env::kLocalRank, 0));
  local_rank_ = options_.local_rank >= 0 ? options_.local_rank
                                         : getenvInt(env::kLocalRank, options_.communicator ? comm_->rank() : 0);
  scaler_ = GradScaler([&] {
    GradScalerOptions o = options_.scaler;
    o.enabled = o.enabled && mixed_precision_ == MixedPrecision::Fp16;
    return o;
  }());
}

Accelerator::~Accelerator() = default;

void Accelerator::prepare(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  ACCEL_CHECK(!model_, "prepare() was already called");
  model.to(device_);
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
    grad_sync_ = std::make_unique<sync::GradientSync>(*comm_, params, names, so);
  }
}

bool Accelerator::accumulate(bool lastBatch) {
  ++micro_step_;
  sync_gradients_ = lastBatch || micro_step_ % accumulation_steps_ == 0;
  if (lastBatch) micro_step_ = 0;
  if (grad_sync_) grad_sync_->setEnabled(sync_gradients_);
  return sync_gradients_;
}

AutocastGuard Accelerator::autocast() const {
  const bool on = mixed_precision_ != MixedPrecision::No;
  return AutocastGuard(on, mixed_precision_ == MixedPrecision::Fp16 ? at::kHalf : at::kBFloat16, device_.is_cuda());
}

void Accelerator::backward(const at::Tensor& loss) {
  at::Tensor l = accumulation_steps_ > 1 ? loss / accumulation_steps_ : loss;
  scaler_.scale(l).backward();
  if (grad_sync_ && sync_gradients_) grad_sync_->finish();
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
  if (!sync_gradients_) return false;
  if (scaler_.enabled()) {
    if (!unscaled_) found_inf_ = scaler_.unscale(gradients(), *comm_);
    step_skipped_ = found_inf_;
    if (!found_inf_) optimizer_->step();
    scaler_.update(found_inf_);
  } else {
    optimizer_->step();
  }
  unscaled_ = false;
  found_inf_ = false;
  optimizer_->zero_grad();
  if (!step_skipped_) ++optimizer_steps_;
  return !step_skipped_;
}

double Accelerator::clipGradNorm(double maxNorm, double normType) {
  ACCEL_CHECK(model_, "clipGradNorm() before prepare()");
  if (scaler_.enabled() && !unscaled_) {
    found_inf_ = scaler_.unscale(gradients(), *comm_);
    unscaled_ = true;
  }
  return torch::nn::utils::clip_grad_norm_(model_->parameters(), maxNorm, normType);
}

at::Tensor Accelerator::gather(const at::Tensor& tensor) {
  at::Tensor t = tensor.dim() == 0 ? tensor.unsqueeze(0) : tensor;
  if (numProcesses() == 1) return t.clone();
  return at::cat(comm_->allgather(t.contiguous()), 0);
}

at::Tensor Accelerator::gatherForMetrics(const at::Tensor& tensor, const ShardedBatchSampler& sampler, bool lastBatch) {
  at::Tensor all = gather(tensor);
  const size_t keep = sampler.remainder();
  if (lastBatch && keep > 0 && static_cast<int64_t>(keep) < all.size(0)) return all.narrow(0, 0, static_cast<int64_t>(keep));
  return all;
}

at::Tensor Accelerator::reduce(const at::Tensor& tensor, Reduction reduction) {
  at::Tensor t = tensor.clone();
  comm_->allreduce(t, ReduceOp::Sum);
  if (reduction == Reduction::Mean) t.div_(numProcesses());
  return t;
}

void Accelerator::broadcast(at::Tensor& tensor, int fromProcess) { comm_->broadcast(tensor, fromProcess); }

at::Tensor Accelerator::padAcrossProcesses(const at::Tensor& tensor, int64_t dim, double padIndex, bool padFirst) {
  ACCEL_CHECK(dim >= 0 && dim < tensor.dim(), "padAcrossProcesses: dim ", dim, " is out of range for a ", tensor.dim(),
              "-d tensor");
  at::Tensor size = at::full({1}, tensor.size(dim), at::kLong);
  comm_->allreduce(size, ReduceOp::Max);
  const int64_t target = size.item<int64_t>();
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

void Accelerator::saveState(const std::string& dir) {
  ACCEL_CHECK(model_ && optimizer_, "saveState() before prepare()");
  if (isMainProcess()) {
    makeDirs(dir);
    torch::serialize::OutputArchive model;
    model_->save(model);
    model.save_to(dir + "/model.pt");
    torch::serialize::OutputArchive optimizer;
    optimizer_->save(optimizer);
    optimizer.save_to(dir + "/optimizer.pt");
    std::ofstream(dir + "/scaler.json") << nlohmann::json{{"scale", scaler_.currentScale()},
                                                          {"growth_tracker", scaler_.growthTracker()}}
                                               .dump(2);
    std::ofstream(dir + "/accel_state.json") << nlohmann::json{{"step", optimizer_steps_},
                                                               {"micro_step", micro_step_},
                                                               {"num_processes", numProcesses()}}
                                                    .dump(2);
  }
  waitForEveryone();
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor rngState;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    rngState = generator.get_state();
  }
  torch::save(rngState, dir + "/random_states_" + std::to_string(processIndex()) + ".pt");
  waitForEveryone();
}

void Accelerator::loadState(const std::string& dir) {
  ACCEL_CHECK(model_ && optimizer_, "loadState() before prepare()");
  for (const char* file : {"/model.pt", "/optimizer.pt", "/accel_state.json"}) {
    ACCEL_CHECK(exists(dir + file), "checkpoint '", dir, "' has no ", file + 1);
  }
  torch::serialize::InputArchive model;
  model.load_from(dir + "/model.pt");
  model_->load(model);
  torch::serialize::InputArchive optimizer;
  optimizer.load_from(dir + "/optimizer.pt");
  optimizer_->load(optimizer);
  if (exists(dir + "/scaler.json")) {
    auto s = nlohmann::json::parse(std::ifstream(dir + "/scaler.json"));
    scaler_.setState(s.at("scale").get<double>(), s.at("growth_tracker").get<int>());
  }
  auto state = nlohmann::json::parse(std::ifstream(dir + "/accel_state.json"));
  optimizer_steps_ = state.at("step").get<int64_t>();
  micro_step_ = state.at("micro_step").get<int64_t>();
  const std::string rng = dir + "/random_states_" + std::to_string(processIndex()) + ".pt";
  if (exists(rng)) {
    at::Tensor s;
    torch::load(s, rng);
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(s);
  }
}

}  // namespace accel
