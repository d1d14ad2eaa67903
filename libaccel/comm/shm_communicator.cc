#include "libaccel/comm/shm_communicator.h"

#include <sched.h>

#include <functional>
#include <sstream>
#include <thread>

#include "accel/error.h"
#include "libaccel/comm/op_queue.h"
#include "libaccel/comm/store_turn.h"

namespace accel::comm {
namespace {

constexpr const char* kSegmentKey = "shm/segment";

shm::DType toDType(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return shm::DType::F32;
    case at::kDouble:
      return shm::DType::F64;
    case at::kBFloat16:
      return shm::DType::BF16;
    case at::kHalf:
      return shm::DType::F16;
    case at::kChar:
      return shm::DType::I8;
    case at::kByte:
      return shm::DType::U8;
    case at::kShort:
      return shm::DType::I16;
    case at::kInt:
      return shm::DType::I32;
    case at::kLong:
      return shm::DType::I64;
    default:
      break;
  }
  throw Error(std::string("shared-memory all-reduce: dtype ") + c10::toString(type) +
              " is not supported (float32/64, bfloat16, float16, int8/16/32/64, uint8)");
}

shm::Op toOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return shm::Op::Sum;
    case ReduceOp::Max:
      return shm::Op::Max;
    case ReduceOp::Min:
      return shm::Op::Min;
  }
  return shm::Op::Sum;
}

void checkTensor(const at::Tensor& t, const char* what) {
  ACCEL_CHECK(t.device().is_cpu() && t.is_contiguous(), "shared-memory ", what,
              " needs a contiguous CPU tensor, got one on ", t.device(),
              t.is_contiguous() ? "" : " (not contiguous)");
}

class ShmCommunicator : public Communicator {
 public:
  ShmCommunicator(std::unique_ptr<shm::Group> group, bool async)
      : group_(std::move(group)), async_(async) {}
  ~ShmCommunicator() override { queue_.reset(); }  // finish queued operations before the group goes

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  const char* backend() const override { return "shm"; }

  std::unique_ptr<Work> allreduceAsync(at::Tensor& tensor, ReduceOp op) override {
    return start(allreduceOp(tensor, op));
  }

  // float32 scaled on its way into the segment and into the sum (Group::allreduceMean), with the
  // float the default's mul_ multiplies by; other dtypes as the default does.
  std::unique_ptr<Work> allreduceMeanAsync(at::Tensor& tensor) override {
    if (tensor.scalar_type() != at::kFloat) return Communicator::allreduceMeanAsync(tensor);
    checkTensor(tensor, "all-reduce");
    at::Tensor t = tensor;  // keeps the storage alive until the operation ran
    shm::Group* g = group_.get();
    const float scale = static_cast<float>(1.0 / size());
    return start([g, t, scale]() mutable {
      g->allreduceMean(t.data_ptr<float>(), static_cast<size_t>(t.numel()), scale);
    });
  }

  // float32 converted to bf16 on its way into the segment and back (Group::allreduceBf16Wire),
  // divided on the way for an average: no passes of their own, and no `wire`. float64 through
  // the bf16 copy.
  std::unique_ptr<Work> allreduceBf16WireAsync(at::Tensor& tensor, at::Tensor& wire,
                                               bool mean) override {
    if (needsBf16Wire(tensor)) return Communicator::allreduceBf16WireAsync(tensor, wire, mean);
    checkTensor(tensor, "all-reduce");
    at::Tensor t = tensor;  // keeps the storage alive until the operation ran
    shm::Group* g = group_.get();
    const float scale = mean ? static_cast<float>(1.0 / size()) : 1.0f;
    return start([g, t, scale]() mutable {
      g->allreduceBf16Wire(t.data_ptr<float>(), static_cast<size_t>(t.numel()), scale);
    });
  }
  bool needsBf16Wire(const at::Tensor& tensor) const override {
    return tensor.scalar_type() != at::kFloat;
  }

  void allreduce(at::Tensor& tensor, ReduceOp op) override {
    queue_->runBlocking(allreduceOp(tensor, op));
  }

  void broadcast(at::Tensor& tensor, int root) override {
    checkTensor(tensor, "broadcast");
    ACCEL_CHECK(root >= 0 && root < size(), "broadcast from rank ", root, " of ", size());
    at::Tensor t = tensor;
    shm::Group* g = group_.get();
    run([g, t, root]() mutable { g->broadcast(t.data_ptr(), t.nbytes(), root); });
  }

  std::vector<at::Tensor> allgather(const at::Tensor& tensor) override {
    at::Tensor in = tensor.contiguous();
    checkTensor(in, "all-gather");
    std::vector<int64_t> sizes{size()};
    sizes.insert(sizes.end(), in.sizes().begin(), in.sizes().end());
    at::Tensor out = at::empty(sizes, in.options());
    shm::Group* g = group_.get();
    run([g, in, out]() mutable { g->allgather(in.data_ptr(), in.nbytes(), out.data_ptr()); });
    return out.unbind(0);
  }

  void barrier() override {
    shm::Group* g = group_.get();
    run([g] { g->barrier(); });
  }

 private:
  std::function<void()> allreduceOp(at::Tensor& tensor, ReduceOp op) {
    checkTensor(tensor, "all-reduce");
    const shm::DType dtype = toDType(tensor.scalar_type());
    at::Tensor t = tensor;  // keeps the storage alive until the operation ran
    shm::Group* g = group_.get();
    return [g, t, dtype, op]() mutable {
      g->allreduce(t.data_ptr(), static_cast<size_t>(t.numel()), dtype, toOp(op));
    };
  }

  void run(std::function<void()> op) { queue_->runBlocking(std::move(op)); }

  // An operation that overlaps the caller (on the communicator's thread) where async, else run at
  // once on the caller's thread with its outcome kept for wait().
  std::unique_ptr<Work> start(std::function<void()> op) {
    if (async_) return queue_->start(std::move(op));
    auto outcome = std::make_shared<Outcome>();
    try {
      queue_->runBlocking(std::move(op));
    } catch (...) {
      outcome->error = std::current_exception();  // thrown by wait(), as from the thread
    }
    outcome->done = true;
    return std::make_unique<OutcomeWork>(std::move(outcome));
  }

  std::unique_ptr<shm::Group> group_;
  bool async_;
  std::unique_ptr<OpQueue> queue_ = std::make_unique<OpQueue>();
};

// Rank 0: a fresh segment, initialised, its name and nonce published.
std::unique_ptr<shm::Group> createGroup(c10d::Store& store, int size, const ShmOptions& options,
                                        const shm::GroupOptions& group) {
  shm::sweepStaleSegments();
  auto segment = shm::Segment::create(options.tag, shm::segmentBytes(size, group));
  if (!segment) throw Error(segment.error());
  const uint64_t nonce = shm::Group::initialise(*segment, size, group);
  const std::string value = segment->name() + " " + std::to_string(nonce);
  // Joined (its pid recorded) before anyone can find it: a joiner always knows whom to watch.
  auto joined = std::make_unique<shm::Group>(std::move(segment).value(), 0, size, nonce, group);
  store.set(kSegmentKey, std::vector<uint8_t>(value.begin(), value.end()));
  return joined;
}

std::unique_ptr<shm::Group> joinGroup(c10d::Store& store, int rank, int size,
                                      const shm::GroupOptions& group) {
  std::vector<uint8_t> bytes;
  try {
    bytes = store.get(kSegmentKey);  // waits at most the store's timeout
  } catch (const std::exception& e) {
    throw TimeoutError("rank " + std::to_string(rank) +
                       ": rank 0 never published the shared-memory segment (" + e.what() + ")");
  }
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string name;
  uint64_t nonce = 0;
  in >> name >> nonce;
  auto segment = shm::Segment::open(name, shm::segmentBytes(size, group));
  if (!segment) {
    throw Error("rank " + std::to_string(rank) + ": " + segment.error() +
                " (are all ranks on one machine? else set ACCEL_CPU_BACKEND=gloo)");
  }
  return std::make_unique<shm::Group>(std::move(segment).value(), rank, size, nonce, group);
}

// Whether the CPUs this process may run on outnumber the ranks (one left for the thread).
bool aCpuToSpare(int size) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0
                       ? CPU_COUNT(&set)
                       : static_cast<int>(std::thread::hardware_concurrency());
  return cpus > size;
}

}  // namespace

std::unique_ptr<Communicator> makeShmCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                  int size, const ShmOptions& options) {
  shm::GroupOptions group = options.group;
  group.timeout = options.timeout;
  store = storeForThisTurn(std::move(store), "shm", rank);
  auto g =
      rank == 0 ? createGroup(*store, size, options, group) : joinGroup(*store, rank, size, group);
  g->attach();
  return std::make_unique<ShmCommunicator>(std::move(g), options.async.value_or(aCpuToSpare(size)));
}

}  // namespace accel::comm
