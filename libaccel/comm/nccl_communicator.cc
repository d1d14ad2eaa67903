#include "libaccel/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "accel/error.h"

namespace accel::comm {
namespace {

void checkCuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(rc));
}

void checkNccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw Error(std::string("NCCL: ") + what + ": " + ncclGetErrorString(rc));
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
    case at::kChar:
      return ncclInt8;
    default:
      throw Error(std::string("NCCL: unsupported tensor type ") + c10::toString(t));
  }
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

// One collective in flight: its device buffer and the event after its copy back.
class NcclWork : public Work {
 public:
  NcclWork(void* buffer, cudaEvent_t done) : buffer_(buffer), done_(done) {}
  ~NcclWork() override {
    if (done_) cudaEventDestroy(done_);
    if (buffer_) cudaFree(buffer_);
  }
  void wait() override { checkCuda(cudaEventSynchronize(done_), "waiting for a collective"); }

 private:
  void* buffer_;
  cudaEvent_t done_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int rank, int size, int device)
      : comm_(comm), stream_(stream), rank_(rank), size_(size), device_(device) {}
  ~NcclCommunicator() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) override {
    ACCEL_CHECK(tensor.is_contiguous(), "NCCL all-reduce needs a contiguous tensor");
    checkCuda(cudaSetDevice(device_), "select device");
    const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
    void* buffer = nullptr;
    checkCuda(cudaMalloc(&buffer, std::max<size_t>(bytes, 1)), "allocate a staging buffer");
    checkCuda(cudaMemcpyAsync(buffer, tensor.data_ptr(), bytes, cudaMemcpyHostToDevice, stream_),
              "copy to device");
    checkNccl(ncclAllReduce(buffer, buffer, static_cast<size_t>(tensor.numel()),
                            ncclType(tensor.scalar_type()), ncclOp(op), comm_, stream_),
              "all-reduce");
    checkCuda(cudaMemcpyAsync(tensor.data_ptr(), buffer, bytes, cudaMemcpyDeviceToHost, stream_),
              "copy back");
    cudaEvent_t done;
    checkCuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "create an event");
    checkCuda(cudaEventRecord(done, stream_), "record an event");
    return std::make_unique<NcclWork>(buffer, done);
  }

  void broadcast(at::Tensor& tensor, int root) override {
    ACCEL_CHECK(tensor.is_contiguous(), "NCCL broadcast needs a contiguous tensor");
    const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
    DeviceBuffer buffer(bytes);
    checkCuda(
        cudaMemcpyAsync(buffer.ptr, tensor.data_ptr(), bytes, cudaMemcpyHostToDevice, stream_),
        "copy to device");
    checkNccl(ncclBroadcast(buffer.ptr, buffer.ptr, static_cast<size_t>(tensor.numel()),
                            ncclType(tensor.scalar_type()), root, comm_, stream_),
              "broadcast");
    checkCuda(
        cudaMemcpyAsync(tensor.data_ptr(), buffer.ptr, bytes, cudaMemcpyDeviceToHost, stream_),
        "copy back");
    checkCuda(cudaStreamSynchronize(stream_), "broadcast");
  }

  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    at::Tensor in = tensor.contiguous();
    const size_t bytes = static_cast<size_t>(in.numel()) * in.element_size();
    DeviceBuffer send(bytes), recv(bytes * static_cast<size_t>(size_));
    at::Tensor out = at::empty({size_ * in.numel()}, in.options());
    checkCuda(cudaMemcpyAsync(send.ptr, in.data_ptr(), bytes, cudaMemcpyHostToDevice, stream_),
              "copy to device");
    checkNccl(ncclAllGather(send.ptr, recv.ptr, static_cast<size_t>(in.numel()),
                            ncclType(in.scalar_type()), comm_, stream_),
              "all-gather");
    checkCuda(cudaMemcpyAsync(out.data_ptr(), recv.ptr, bytes * static_cast<size_t>(size_),
                              cudaMemcpyDeviceToHost, stream_),
              "copy back");
    checkCuda(cudaStreamSynchronize(stream_), "all-gather");
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size_; ++r)
      parts.push_back(out.narrow(0, r * in.numel(), in.numel()).view(in.sizes()).clone());
    return parts;
  }

  void barrier() override {
    at::Tensor one = at::ones({1});
    allreduce(one, ReduceOp::Sum);
  }

 private:
  struct DeviceBuffer {
    explicit DeviceBuffer(size_t bytes) {
      checkCuda(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)), "allocate");
    }
    ~DeviceBuffer() { cudaFree(ptr); }
    void* ptr = nullptr;
  };

  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_;
  int size_;
  int device_;
};

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
  checkCuda(cudaSetDevice(device), "select device");
  ncclUniqueId id;
  if (rank == 0) {
    checkNccl(ncclGetUniqueId(&id), "get a unique id");
    store->set("nccl_unique_id", std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                                                      reinterpret_cast<uint8_t*>(&id) + sizeof id));
  } else {
    store->wait({"nccl_unique_id"}, timeout);
    auto bytes = store->get("nccl_unique_id");
    ACCEL_CHECK(bytes.size() == sizeof id, "NCCL unique id of ", bytes.size(),
                " bytes in the store");
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  ncclComm_t comm;
  checkNccl(ncclCommInitRank(&comm, size, id, rank), "join the communicator");
  cudaStream_t stream;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "create a stream");
  return std::make_unique<NcclCommunicator>(comm, stream, rank, size, device);
}

}  // namespace accel::comm
