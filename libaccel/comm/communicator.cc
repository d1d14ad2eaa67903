#include "accel/communicator.h"

#include "accel/error.h"

namespace accel {
namespace {

// The bf16 wire through a bf16 copy: the all-reduce of the copy, then the sum widened back into
// the caller's tensor when waited for (on CUDA: queued on the caller's stream after the wait
// ordered it behind the collective).
class WidenedWork : public Work {
 public:
  WidenedWork(std::unique_ptr<Work> inner, at::Tensor wire, at::Tensor tensor)
      : inner_(std::move(inner)), wire_(std::move(wire)), tensor_(std::move(tensor)) {}
  void wait() override {
    inner_->wait();
    tensor_.copy_(wire_);
  }

 private:
  std::unique_ptr<Work> inner_;
  at::Tensor wire_, tensor_;
};

}  // namespace

std::unique_ptr<Work> Communicator::allreduceMeanAsync(at::Tensor& tensor) {
  tensor.mul_(1.0 / size());
  return allreduceAsync(tensor, ReduceOp::Sum);
}

std::unique_ptr<Work> Communicator::allreduceBf16WireAsync(at::Tensor& tensor, at::Tensor& wire,
                                                           bool mean) {
  ACCEL_CHECK(wire.defined(), "allreduceBf16WireAsync: no bf16 wire tensor given");
  if (mean) tensor.mul_(1.0 / size());
  wire.copy_(tensor);  // rounds to bf16
  return std::make_unique<WidenedWork>(allreduceAsync(wire, ReduceOp::Sum), wire, tensor);
}

}  // namespace accel
