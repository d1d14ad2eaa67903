#include "libaccel/comm/hierarchical_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "accel/error.h"
#include "libaccel/comm/op_queue.h"

namespace accel::comm {
namespace {

class HierarchicalCommunicator : public Communicator {
 public:
  HierarchicalCommunicator(const HierarchicalLayout& layout, std::unique_ptr<Communicator> local,
                           std::unique_ptr<Communicator> leaders)
      : layout_(layout), local_(std::move(local)), leaders_(std::move(leaders)) {}
  ~HierarchicalCommunicator() override { queue_.reset(); }  // finish queued operations first

  int rank() const override { return layout_.rank; }
  int size() const override { return layout_.size; }
  const char* backend() const override { return "hier"; }

  std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) override {
    return queue_->start(allreduceOp(tensor, op));
  }
  void allreduce(at::Tensor& tensor, ReduceOp op) override {
    queue_->runBlocking(allreduceOp(tensor, op));
  }

  void broadcast(at::Tensor& tensor, int root) override {
    ACCEL_CHECK(root >= 0 && root < size(), "broadcast from rank ", root, " of ", size());
    at::Tensor t = tensor;
    queue_->runBlocking([this, t, root]() mutable {
      const int rootMachine = root / layout_.local_size;
      if (machine() == rootMachine) local_->broadcast(t, root % layout_.local_size);
      if (leaders_) leaders_->broadcast(t, rootMachine);
      if (machine() != rootMachine) local_->broadcast(t, 0);
    });
  }

  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    at::Tensor in = tensor.contiguous();
    std::vector<int64_t> sizes{size()};
    sizes.insert(sizes.end(), in.sizes().begin(), in.sizes().end());
    at::Tensor all = at::empty(sizes, in.options());
    queue_->runBlocking([this, in, all]() mutable {
      at::Tensor machineRows = at::stack(local_->allgather(in));
      if (leaders_) all.copy_(at::cat(leaders_->allgather(machineRows)));
      local_->broadcast(all, 0);
    });
    return all.unbind(0);
  }

  void barrier() override {
    queue_->runBlocking([this] {
      local_->barrier();
      if (leaders_) leaders_->barrier();
      local_->barrier();
    });
  }

 private:
  int machine() const { return layout_.rank / layout_.local_size; }

  std::function<void()> allreduceOp(at::Tensor& tensor, ReduceOp op) {
    at::Tensor t = tensor;  // keeps the storage alive until the operation ran
    return [this, t, op]() mutable {
      local_->allreduce(t, op);
      if (leaders_ && t.scalar_type() == at::kBFloat16) {
        // Gloo has no bfloat16 before torch 2.x, and sums in it after: add the machines' sums in
        // fp32 and round once, as the shared-memory step does.
        at::Tensor wide = t.to(at::kFloat);
        leaders_->allreduce(wide, op);
        t.copy_(wide);
      } else if (leaders_) {
        leaders_->allreduce(t, op);
      }
      local_->broadcast(t, 0);
    };
  }

  HierarchicalLayout layout_;
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> leaders_;  // local rank 0 only
  std::unique_ptr<OpQueue> queue_ = std::make_unique<OpQueue>();
};

}  // namespace

std::unique_ptr<Communicator> makeHierarchicalCommunicator(c10::intrusive_ptr<c10d::Store> store,
                                                           const HierarchicalLayout& layout,
                                                           const ShmOptions& shm,
                                                           const GlooOptions& gloo) {
  const int machines = layout.local_size > 0 ? layout.size / layout.local_size : 0;
  ACCEL_CHECK(layout.local_size > 0 && machines * layout.local_size == layout.size &&
                  layout.local_rank >= 0 && layout.local_rank < layout.local_size &&
                  layout.rank % layout.local_size == layout.local_rank,
              "shared memory inside machines needs LOCAL_WORLD_SIZE ranks on every machine, "
              "numbered machine by machine; "
              "got RANK=",
              layout.rank, " WORLD_SIZE=", layout.size, " LOCAL_RANK=", layout.local_rank,
              " LOCAL_WORLD_SIZE=", layout.local_size, " (set ACCEL_CPU_BACKEND=gloo)");
  const int machine = layout.rank / layout.local_size;
  auto local = makeShmCommunicator(
      c10::make_intrusive<c10d::PrefixStore>("node" + std::to_string(machine), store),
      layout.local_rank, layout.local_size, shm);
  std::unique_ptr<Communicator> leaders;
  if (layout.local_rank == 0) {
    leaders = makeGlooCommunicator(c10::make_intrusive<c10d::PrefixStore>("leaders", store),
                                   machine, machines, gloo);
  }
  return std::make_unique<HierarchicalCommunicator>(layout, std::move(local), std::move(leaders));
}

}  // namespace accel::comm
