#include "libaccel/comm/collective_engine.h"

#include <atomic>

#include <c10/core/ScalarType.h>

#include "accel/error.h"

namespace accel::comm {
namespace {

bool ncclHasType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kByte:
    case at::kChar:
      return true;
    default:
      return false;
  }
}

// "all-reduce of 1024 Float elements": what the caller asked for, in its words.
std::string describe(const char* op, const Collective& c) {
  return std::string(op) + " of " + std::to_string(c.count) + " " + c10::toString(c.dtype) +
         (c.count == 1 ? " element" : " elements");
}

std::string timeoutText(std::chrono::milliseconds timeout) {
  return std::to_string(timeout.count()) + " ms";
}

}  // namespace

std::string nextNcclUniqueIdKey() {
  static std::atomic<int> built{0};
  return "accel/nccl_unique_id/" + std::to_string(built++);
}

CollectiveEngine::CollectiveEngine(std::unique_ptr<DeviceQueue> queue, EngineOptions options)
    : queue_(std::move(queue)), options_(std::move(options)) {
  if (options_.watchdog_thread) watchdog_ = std::thread([this] { watchdogLoop(); });
}

CollectiveEngine::~CollectiveEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void CollectiveEngine::checkTensor(const char* op, const at::Tensor& tensor, bool asBytes) const {
  if (tensor.device() != options_.device) {
    throw Error(std::string("NCCL ") + op + ": the tensor is on " + tensor.device().str() +
                "; this communicator takes tensors on " + options_.device.str() +
                " (move it there first, e.g. with Accelerator::toDevice)");
  }
  if (!tensor.is_contiguous())
    throw Error(std::string("NCCL ") + op + " needs a contiguous tensor (call .contiguous())");
  if (!asBytes && !ncclHasType(tensor.scalar_type()) && tensor.scalar_type() != at::kBool) {
    throw Error(std::string("NCCL ") + op + ": NCCL has no " + c10::toString(tensor.scalar_type()) +
                " type, and its values cannot be reduced as bytes");
  }
}

Collective collectiveOf(CollectiveKind kind, const at::Tensor& in, void* recv, ReduceOp op,
                        int root) {
  Collective c{kind, in.data_ptr(), recv, static_cast<size_t>(in.numel()), in.scalar_type(),
               op,   root};
  if (kind == CollectiveKind::AllReduce) {
    if (c.dtype == at::kBool) {  // one byte each; a sum of bools is their or (torch's rule)
      c.dtype = at::kByte;
      if (op == ReduceOp::Sum) c.op = ReduceOp::Max;
    }
    return c;
  }
  if (!ncclHasType(c.dtype)) {  // moved, not reduced: the bytes are the values
    c.dtype = at::kByte;
    c.count = in.nbytes();
  }
  return c;
}

int CollectiveEngine::takeEvent() {
  if (free_events_.empty()) return next_event_++;
  const int event = free_events_.back();
  free_events_.pop_back();
  return event;
}

uint64_t CollectiveEngine::start(const char* op, const Collective& collective,
                                 const std::vector<at::Tensor>& tensors) {
  std::unique_lock<std::mutex> lock(mutex_);
  throwIfAbortedLocked();
  queue_->recordOnCaller(0);
  queue_->queueWaits(0);
  const QueueState launched = queue_->launch(collective);
  if (launched.kind != QueueState::Ready)
    awaitLaunch(lock, "NCCL " + describe(op, collective), launched);
  const int event = takeEvent();
  queue_->recordOnQueue(event);
  for (const auto& t : tensors) queue_->keepUntilDone(t);
  const uint64_t seq = next_seq_++;
  in_flight_.push_back({seq, describe(op, collective), event, options_.now()});
  return seq;
}

void CollectiveEngine::orderCaller(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  throwIfAbortedLocked();
  if (seq <= completed_) return;
  const InFlight& entry = in_flight_.at(seq - in_flight_.front().seq);
  queue_->callerWaits(entry.event);
}

void CollectiveEngine::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t last = next_seq_ - 1;
  while (completed_ < last) {
    throwIfAbortedLocked();
    retireLocked();
    if (completed_ >= last) break;
    // The watchdog (or, without its thread, this loop) applies the timeout.
    if (!options_.watchdog_thread) {
      lock.unlock();
      check(options_.now());
      lock.lock();
    }
    wake_.wait_for(lock, std::chrono::microseconds(200));
  }
  throwIfAbortedLocked();
}

// Collectives complete in the order the communicator's stream runs them.
void CollectiveEngine::retireLocked() {
  while (!in_flight_.empty() && aborted_.empty() && queue_->done(in_flight_.front().event)) {
    completed_ = in_flight_.front().seq;
    free_events_.push_back(in_flight_.front().event);
    in_flight_.pop_front();
  }
}

// Non-blocking NCCL: the launch may still be in progress, and nothing else may enter the
// communicator until it is not (the watchdog leaves NCCL alone meanwhile: launching_). Polled
// under the lock, so never after an abort; bounded by the timeout.
void CollectiveEngine::awaitLaunch(std::unique_lock<std::mutex>& lock, const std::string& what,
                                   QueueState state) {
  launching_ = true;
  const auto deadline = options_.now() + options_.timeout;
  std::string failed;
  while (state.kind == QueueState::InProgress && aborted_.empty()) {
    if (options_.now() > deadline) {
      failed = what + " was not taken within " + timeoutText(options_.timeout) +
               " (a peer did not start, or cannot be reached); the communicator was aborted";
      break;
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
    if (aborted_.empty()) state = queue_->state();
  }
  launching_ = false;
  if (state.kind == QueueState::Failed && aborted_.empty())
    failed = what + " failed: " + state.error + "; the communicator was aborted";
  if (!failed.empty() && markAbortedLocked(failed)) abortQueue(lock);
  throwIfAbortedLocked();
}

void CollectiveEngine::check(std::chrono::steady_clock::time_point now) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (checkLocked(now)) abortQueue(lock);
}

// The watchdog's rule; true when it decided to abort (the caller aborts the queue).
bool CollectiveEngine::checkLocked(std::chrono::steady_clock::time_point now) {
  if (!aborted_.empty() || unloading_) return false;
  QueueState state;
  try {
    retireLocked();
    // A launch in progress on another thread: NCCL takes no second call meanwhile.
    if (!launching_) state = queue_->state();
  } catch (const QueueUnloading&) {  // the program is exiting: nothing left to watch
    unloading_ = true;
    wake_.notify_all();
    return false;
  } catch (const std::exception& e) {  // a CUDA error: the device is no longer usable
    return markAbortedLocked(std::string("checking the collectives in flight failed: ") + e.what() +
                             "; the communicator was aborted");
  }
  if (state.kind == QueueState::Failed) {
    return markAbortedLocked(
        "NCCL reported an error" +
        (in_flight_.empty() ? std::string()
                            : " while the " + in_flight_.front().what + " was in flight") +
        ": " + state.error + " (a peer failed?); the communicator was aborted");
  }
  if (!in_flight_.empty() && now - in_flight_.front().started > options_.timeout) {
    return markAbortedLocked("NCCL " + in_flight_.front().what + " did not complete within " +
                             timeoutText(options_.timeout) +
                             " (a peer died or stopped calling collectives); the communicator "
                             "was aborted");
  }
  return false;
}

// From now on every call throws `reason` (the first reason stands); true for the one call that
// must abort the queue.
bool CollectiveEngine::markAbortedLocked(const std::string& reason) {
  if (!aborted_.empty()) return false;
  aborted_ = reason;
  wake_.notify_all();
  return true;
}

// ncclCommAbort waits for the device: without the lock, so that every other call returns
// (throwing the reason) instead of waiting behind it. No other queue call can start: each looks
// at aborted_ under the lock first.
void CollectiveEngine::abortQueue(std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  queue_->abort();
  lock.lock();
}

void CollectiveEngine::throwIfAbortedLocked() const {
  if (!aborted_.empty()) throw Error(aborted_);
}

void CollectiveEngine::watchdogLoop() {
  try {
    queue_->bindThread();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    markAbortedLocked(std::string("the watchdog cannot use the communicator's device: ") +
                      e.what());
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && !unloading_) {
    wake_.wait_for(lock, options_.poll_interval);
    if (stopping_) break;
    if (checkLocked(options_.now())) abortQueue(lock);
  }
}

void CollectiveEngine::awaitReady(const std::function<QueueState()>& poll,
                                  const std::function<void()>& abort, const std::string& what,
                                  const EngineOptions& options) {
  const auto deadline = options.now() + options.timeout;
  for (;;) {
    const QueueState state = poll();
    if (state.kind == QueueState::Ready) return;
    if (state.kind == QueueState::Failed) {
      abort();
      throw Error(what + " failed: " + state.error);
    }
    if (options.now() > deadline) {
      abort();
      throw Error(what + " did not complete within " + timeoutText(options.timeout) +
                  " (a peer did not start, or cannot be reached); aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

size_t CollectiveEngine::eventsCreated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(next_event_);
}

std::string CollectiveEngine::abortReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

size_t CollectiveEngine::inFlight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.size();
}

namespace {

class EngineWork : public Work {
 public:
  EngineWork(CollectiveEngine& engine, uint64_t seq) : engine_(engine), seq_(seq) {}
  void wait() override { engine_.orderCaller(seq_); }

 private:
  CollectiveEngine& engine_;
  uint64_t seq_;
};

class EngineCommunicator : public Communicator {
 public:
  EngineCommunicator(std::unique_ptr<DeviceQueue> queue, int rank, int size, EngineOptions options)
      : device_(options.device),
        engine_(std::move(queue), std::move(options)),
        rank_(rank),
        size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  at::Device device() const override { return device_; }

  std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) override {
    engine_.checkTensor("all-reduce", tensor);
    const Collective c = collectiveOf(CollectiveKind::AllReduce, tensor, tensor.data_ptr(), op);
    return std::make_unique<EngineWork>(engine_, engine_.start("all-reduce", c, {tensor}));
  }

  void broadcast(at::Tensor& tensor, int root) override {
    engine_.checkTensor("broadcast", tensor, /*asBytes=*/true);
    ACCEL_CHECK(root >= 0 && root < size_, "broadcast from rank ", root, " of ", size_);
    const Collective c =
        collectiveOf(CollectiveKind::Broadcast, tensor, tensor.data_ptr(), ReduceOp::Sum, root);
    engine_.orderCaller(engine_.start("broadcast", c, {tensor}));
  }

  // One output allocation (the caller's allocator, on its stream); the parts are views of it.
  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    at::Tensor in = tensor.contiguous();
    engine_.checkTensor("all-gather", in, /*asBytes=*/true);
    at::Tensor out = at::empty({size_ * in.numel()}, in.options());
    const Collective c = collectiveOf(CollectiveKind::AllGather, in, out.data_ptr());
    engine_.orderCaller(engine_.start("all-gather", c, {in, out}));
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size_; ++r)
      parts.push_back(out.narrow(0, r * in.numel(), in.numel()).view(in.sizes()));
    return parts;
  }

  void barrier() override {
    if (!barrier_.defined()) barrier_ = at::zeros({1}, at::TensorOptions().device(device_));
    Collective c{CollectiveKind::AllReduce,
                 barrier_.data_ptr(),
                 barrier_.data_ptr(),
                 1,
                 barrier_.scalar_type(),
                 ReduceOp::Sum,
                 0};
    engine_.start("barrier", c, {barrier_});
    engine_.synchronize();
  }

  void synchronize() override { engine_.synchronize(); }

 private:
  at::Device device_;
  CollectiveEngine engine_;
  int rank_;
  int size_;
  at::Tensor barrier_;  // allocated by the first barrier(), then reused
};

}  // namespace

std::unique_ptr<Communicator> makeEngineCommunicator(std::unique_ptr<DeviceQueue> queue, int rank,
                                                     int size, EngineOptions options) {
  return std::make_unique<EngineCommunicator>(std::move(queue), rank, size, std::move(options));
}

}  // namespace accel::comm
