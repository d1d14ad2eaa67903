#include "libaccel/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "accel/error.h"
#include "libaccel/comm/collective_engine.h"

namespace accel::comm {
namespace {

void checkCuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(rc));
}

ncclDataType_t ncclType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kByte:
      return ncclUint8;
    default:  // CollectiveEngine::checkTensor admits no other type
      return ncclInt8;
  }
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Sum:
      break;
  }
  return ncclSum;
}

QueueState stateOf(ncclResult_t rc, ncclComm_t comm) {
  if (rc == ncclSuccess) return {};
  if (rc == ncclInProgress) return {QueueState::InProgress, ""};
  return {QueueState::Failed,
          std::string(ncclGetErrorString(rc)) + " (" + ncclGetLastError(comm) + ")"};
}

// The communicator's asynchronous state (ncclCommGetAsyncError), as CollectiveEngine reads it.
QueueState commState(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm, &async);
  return stateOf(rc != ncclSuccess ? rc : async, comm);
}

// The CUDA and NCCL calls, one each; every decision is CollectiveEngine's.
class CudaQueue : public DeviceQueue {
 public:
  CudaQueue(ncclComm_t comm, int device)
      : comm_(comm), device_(device), stream_(c10::cuda::getStreamFromPool(true, device)) {}
  ~CudaQueue() override;

  // The watchdog's thread: on the communicator's GPU (not device 0's context), and allowed to
  // query events while another thread captures a CUDA graph (relaxed capture mode, as torch's
  // watchdog).
  void bindThread() override {
    checkCuda(cudaSetDevice(device_), "make the communicator's GPU current on the watchdog");
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    checkCuda(cudaThreadExchangeStreamCaptureMode(&mode), "relax the watchdog's capture mode");
  }
  void recordOnCaller(int e) override {
    c10::cuda::CUDAGuard guard(device_);
    checkCuda(cudaEventRecord(event(e), c10::cuda::getCurrentCUDAStream(device_).stream()),
              "record an event on the caller's stream");
  }
  void queueWaits(int e) override {
    checkCuda(cudaStreamWaitEvent(stream_.stream(), event(e), 0), "order the NCCL stream");
  }
  QueueState launch(const Collective& c) override {
    c10::cuda::CUDAGuard guard(device_);
    return stateOf(call(c), comm_);
  }
  void recordOnQueue(int e) override {
    checkCuda(cudaEventRecord(event(e), stream_.stream()), "record an event on the NCCL stream");
  }
  void callerWaits(int e) override {
    c10::cuda::CUDAGuard guard(device_);
    checkCuda(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(device_).stream(), event(e), 0),
              "order the caller's stream after a collective");
  }
  bool done(int e) override {
    const cudaError_t rc = cudaEventQuery(event(e));
    if (rc == cudaErrorNotReady) return false;
    if (rc == cudaErrorCudartUnloading) throw QueueUnloading("the CUDA runtime is unloading");
    checkCuda(rc, "query a collective's event");
    return true;
  }
  void keepUntilDone(const at::Tensor& t) override {
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream_);
  }
  QueueState state() override { return commState(comm_); }
  void abort() override {
    aborted_ = true;
    c10::cuda::CUDAGuard guard(device_);  // whichever thread aborts: its device is restored
    ncclCommAbort(comm_);
  }

 private:
  ncclResult_t call(const Collective& c) {
    const ncclDataType_t type = ncclType(c.dtype);
    switch (c.kind) {
      case CollectiveKind::AllReduce:
        return ncclAllReduce(c.send, c.recv, c.count, type, ncclOp(c.op), comm_, stream_.stream());
      case CollectiveKind::Broadcast:
        return ncclBroadcast(c.send, c.recv, c.count, type, c.root, comm_, stream_.stream());
      case CollectiveKind::AllGather:
        return ncclAllGather(c.send, c.recv, c.count, type, comm_, stream_.stream());
    }
    return ncclInvalidArgument;
  }
  cudaEvent_t event(int e) {
    while (events_.size() <= static_cast<size_t>(e)) {
      c10::cuda::CUDAGuard guard(device_);
      cudaEvent_t created;
      checkCuda(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), "create an event");
      events_.push_back(created);
    }
    return events_[static_cast<size_t>(e)];
  }

  ncclComm_t comm_;
  int device_;
  c10::cuda::CUDAStream stream_;
  std::vector<cudaEvent_t> events_;
  bool aborted_ = false;
};

// A healthy communicator is finalised (its collectives complete, for at most 10 s, else it is
// aborted) and destroyed; an aborted one was freed by ncclCommAbort.
CudaQueue::~CudaQueue() {
  c10::cuda::CUDAGuard guard(device_);
  if (!aborted_) {
    ncclResult_t state = ncclCommFinalize(comm_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

// Under this communicator's own key (nextNcclUniqueIdKey): a second communicator of the job
// never reads the first one's id.
ncclUniqueId exchangeId(c10d::Store& store, int rank, std::chrono::milliseconds timeout) {
  const std::string key = nextNcclUniqueIdKey();
  ncclUniqueId id;
  if (rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      throw Error(std::string("NCCL: get a unique id: ") + ncclGetErrorString(rc));
    store.set(key, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                                        reinterpret_cast<uint8_t*>(&id) + sizeof id));
  } else {
    store.wait({key}, timeout);
    auto bytes = store.get(key);
    ACCEL_CHECK(bytes.size() == sizeof id, "NCCL unique id of ", bytes.size(),
                " bytes in the store");
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  return id;
}

}  // namespace

std::string cudaUnavailableReason() {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
  if (count == 0) return "no CUDA device";
  return "";
}

std::unique_ptr<Communicator> makeNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                   int size, int device,
                                                   std::chrono::milliseconds timeout) {
  c10::cuda::CUDAGuard guard(device);
  const ncclUniqueId id = exchangeId(*store, rank, timeout);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  EngineOptions options;
  options.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device));
  options.timeout = timeout;
  CollectiveEngine::awaitReady(
      [&, first = true]() mutable {
        if (std::exchange(first, false) || comm == nullptr) return stateOf(rc, comm);
        return commState(comm);
      },
      [&] {
        if (comm) ncclCommAbort(comm);
      },
      "NCCL: rank " + std::to_string(rank) + " joining the communicator of " +
          std::to_string(size) + " ranks on cuda:" + std::to_string(device),
      options);
  return makeEngineCommunicator(std::make_unique<CudaQueue>(comm, device), rank, size, options);
}

}  // namespace accel::comm
