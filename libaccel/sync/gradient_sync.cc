#include "libaccel/sync/gradient_sync.h"

#include <functional>
#include <utility>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "accel/error.h"

namespace accel::sync {
namespace {

// Runs after a parameter's gradient accumulator (autograd's AccumulateGrad) stored this
// backward's gradient in .grad: DDP's reducer hooks the same place.
class AfterAccumulation : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulation(std::function<void()> f) : f_(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    f_();
    return outputs;
  }

 private:
  std::function<void()> f_;
};

}  // namespace

struct GradientSync::Bucket {
  at::Tensor flat;               // the bucket's gradients, back to back
  bool compress = false;         // bf16 on the wire (allreduceBf16WireAsync)
  at::Tensor wire;               // its bf16 copy, where the communicator needs one
  std::vector<size_t> params;    // indices into params_
  std::vector<int64_t> offsets;  // element offset of each param in `flat`
  size_t ready = 0;
  std::unique_ptr<Work> work;
};

GradientSync::GradientSync(Communicator& comm, std::vector<at::Tensor> params,
                           std::vector<std::string> names, GradientSyncOptions options)
    : comm_(comm), params_(std::move(params)), names_(std::move(names)), options_(options) {
  where_.resize(params_.size());
  ready_.assign(params_.size(), false);
  // Reverse order: the last layers' gradients come first in backward. A bucket holds one dtype
  // on one device; its flat buffer is allocated once the layout is known.
  std::unique_ptr<Bucket> current;
  int64_t numel = 0;
  size_t bytes = 0;
  auto close = [&] {
    current->flat =
        at::zeros({numel}, params_[current->params.front()].options().requires_grad(false));
    current->compress = options_.bf16_compression && (current->flat.scalar_type() == at::kFloat ||
                                                      current->flat.scalar_type() == at::kDouble);
    if (current->compress && comm_.needsBf16Wire(current->flat)) {
      current->wire = at::empty({numel}, current->flat.options().dtype(at::kBFloat16));
    }
    buckets_.push_back(std::move(current));
  };
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    if (!p.requires_grad()) continue;
    const size_t size = static_cast<size_t>(p.numel()) * p.element_size();
    if (current) {
      const at::Tensor& first = params_[current->params.front()];
      if (bytes + size > options_.bucket_cap_bytes || first.scalar_type() != p.scalar_type() ||
          first.device() != p.device()) {
        close();
      }
    }
    if (!current) {
      current = std::make_unique<Bucket>();
      numel = 0;
      bytes = 0;
    }
    where_[k] = {buckets_.size(), current->params.size()};
    current->offsets.push_back(numel);
    current->params.push_back(k);
    numel += p.numel();
    bytes += size;
  }
  if (current) close();

  if (options_.gradient_as_bucket_view) {
    installViews();
    return;
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    hooks_.emplace_back(k, params_[k].register_hook([this, k](at::Tensor grad) {
      onGradient(k, grad);
      return grad;
    }));
  }
}

// Each .grad becomes its bucket's view (a gradient already there is kept, copied in), and each
// parameter's accumulator gets the hook that counts it.
void GradientSync::installViews() {
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    at::Tensor view = viewOf(k);
    if (params_[k].grad().defined()) view.copy_(params_[k].grad());
    params_[k].mutable_grad() = view;
    post_hooks_.push_back(hook(k));
  }
}

GradientSync::PostHook GradientSync::hook(size_t k) {
  auto accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
  if (!accumulator) throw Error("parameter " + std::to_string(k) + " is not a leaf");
  const uintptr_t key = accumulator->add_post_hook(
      std::make_unique<AfterAccumulation>([this, k] { onAccumulated(k); }));
  return {k, std::move(accumulator), key};
}

void GradientSync::rehook() {
  for (PostHook& h : post_hooks_) {
    if (torch::autograd::impl::grad_accumulator(params_[h.param]) == h.accumulator) continue;
    h.accumulator->del_post_hook(h.key);
    h = hook(h.param);
  }
}

at::Tensor GradientSync::viewOf(size_t k) const {
  const auto [b, slot] = where_[k];
  const Bucket& bucket = *buckets_[b];
  return bucket.flat.narrow(0, bucket.offsets[slot], params_[k].numel()).view(params_[k].sizes());
}

void GradientSync::zeroGradients() {
  if (!options_.gradient_as_bucket_view) return;
  for (auto& bucket : buckets_) bucket->flat.zero_();
  for (size_t k = 0; k < params_.size(); ++k) {
    if (params_[k].requires_grad()) params_[k].mutable_grad() = viewOf(k);
  }
}

// .grad becomes the view again, holding what .grad held (a tensor autograd stored on its own
// because .grad had been released or replaced), or zeros when it held nothing.
void GradientSync::adoptIntoView(size_t k) {
  at::Tensor& grad = params_[k].mutable_grad();
  at::Tensor view = viewOf(k);
  if (!grad.defined()) {
    view.zero_();
  } else if (grad.data_ptr() != view.data_ptr()) {
    view.copy_(grad);
  }
  grad = view;
}

// The parameters may outlive this object (a model kept after its Accelerator): a later
// backward must not call into it.
GradientSync::~GradientSync() {
  for (const auto& [k, hook] : hooks_) params_[k].remove_hook(hook);
  for (const PostHook& h : post_hooks_) h.accumulator->del_post_hook(h.key);
}

// Autograd has accumulated this backward's gradient into .grad: into the bucket, unless .grad
// was replaced since (reset to none by a zero_grad(set_to_none=True), or assigned), when
// autograd stored a tensor of its own — copied in, and .grad made the view again.
void GradientSync::onAccumulated(size_t k) {
  if (!enabled_) return;
  pending_ = true;
  if (ready_[k]) return;
  ready_[k] = true;
  adoptIntoView(k);
  const size_t b = where_[k].first;
  Bucket& bucket = *buckets_[b];
  if (++bucket.ready == bucket.params.size() && b == next_launch_) launchReady();
}

void GradientSync::onGradient(size_t k, const at::Tensor& grad) {
  if (!enabled_) return;
  pending_ = true;
  if (ready_[k]) return;  // already counted (should not happen for leaves)
  ready_[k] = true;
  auto [b, slot] = where_[k];
  Bucket& bucket = *buckets_[b];
  at::Tensor view = bucket.flat.narrow(0, bucket.offsets[slot], params_[k].numel());
  // The hook sees this backward's gradient before it is added to .grad, which may already hold
  // the steps accumulated without sync: reduce their sum. A .grad that is still the view the
  // last sync left (nobody cleared it) gets its own storage first: autograd adds to .grad in
  // place after this hook, and the bucket is about to be all-reduced.
  at::Tensor& accumulated = params_[k].mutable_grad();
  if (accumulated.defined() && accumulated.is_alias_of(bucket.flat))
    accumulated = accumulated.clone();
  // Written into the bucket in one pass, divided by the world size before the sum (as DDP's
  // all-reduce hook): a sum of fp16 gradients near their range's top would overflow where DDP's
  // does not.
  const at::Tensor flatGrad = grad.reshape({-1});
  if (accumulated.defined()) {
    at::add_out(view, flatGrad, accumulated.reshape({-1}));
    if (comm_.size() > 1) view.mul_(1.0 / comm_.size());
  } else if (comm_.size() > 1) {
    at::mul_out(view, flatGrad, at::scalar_tensor(1.0 / comm_.size(), at::kDouble));
  } else {
    view.copy_(flatGrad);
  }
  if (++bucket.ready == bucket.params.size() && b == next_launch_) launchReady();
}

// Collectives are matched by the order they start in, on every communicator: starting a full
// bucket ahead of an earlier one that is still waiting for a gradient would, on a rank whose
// unused parameters differ, pair it with a different bucket on a peer (wrong sums, or a hang
// when the sizes differ).
void GradientSync::launchReady() {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_]->ready == buckets_[next_launch_]->params.size()) {
    launch(*buckets_[next_launch_++]);
  }
}

void GradientSync::launch(Bucket& bucket) {
  // As views, the bucket holds each rank's sum: divided before the all-reduce (by the
  // communicator, on the way, where it can), as the copying hook divides each gradient on its way
  // in (the same product, element by element).
  const bool divide = options_.gradient_as_bucket_view && comm_.size() > 1;
  const auto start = std::chrono::steady_clock::now();
  if (bucket.compress) {
    bucket.work = comm_.allreduceBf16WireAsync(bucket.flat, bucket.wire, divide);
  } else {
    bucket.work = divide ? comm_.allreduceMeanAsync(bucket.flat)
                         : comm_.allreduceAsync(bucket.flat, ReduceOp::Sum);
  }
  comm_time_ += std::chrono::steady_clock::now() - start;
}

std::chrono::steady_clock::duration GradientSync::takeCommTime() {
  return std::exchange(comm_time_, {});
}

void GradientSync::finish() {
  if (!enabled_ || !pending_) return;
  std::vector<std::string> missing;
  for (size_t b = next_launch_; b < buckets_.size(); ++b) {
    Bucket& bucket = *buckets_[b];
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const size_t k = bucket.params[slot];
      if (ready_[k]) continue;
      if (!options_.find_unused_parameters) {
        missing.push_back(names_.empty() ? "#" + std::to_string(k) : names_[k]);
        continue;
      }
      // Unused here (maybe not on other ranks): contribute what is accumulated, else zero.
      contributeUnused(bucket, slot);
      ready_[k] = true;
      ++bucket.ready;
    }
  }
  if (!missing.empty()) failMissing(missing);
  launchReady();
  writeBack();
}

// A parameter unused in this backward contributes what .grad accumulated, else zero. As a view,
// the bucket already holds it (zeroed after the last step, or accumulated since); launch()
// divides it.
void GradientSync::contributeUnused(Bucket& bucket, size_t slot) {
  const size_t k = bucket.params[slot];
  if (options_.gradient_as_bucket_view) {
    adoptIntoView(k);
    return;
  }
  const at::Tensor& g = params_[k].grad();
  at::Tensor view = viewOf(k);
  if (g.defined())
    view.copy_(g).mul_(1.0 / comm_.size());
  else
    view.zero_();
}

void GradientSync::failMissing(const std::vector<std::string>& missing) {
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 10; ++i) list += (i ? ", " : "") + missing[i];
  if (missing.size() > 10) list += ", ... (" + std::to_string(missing.size()) + " in all)";
  for (auto& bucket : buckets_) {
    if (bucket->work) bucket->work->wait();  // leave no collective half-done
  }
  startOver();
  throw Error("parameters received no gradient in this backward: " + list +
              "; every rank must use every parameter, or enable find_unused_parameters");
}

// Once its all-reduce finished, each parameter's average (each rank's part was divided before
// the sum), in full precision, becomes its .grad as a view of the bucket: no copy (DDP's
// gradient_as_bucket_view). The next synced backward writes the bucket again; a .grad not
// cleared by then is given its own storage first (onGradient).
void GradientSync::writeBack() {
  for (auto& bucket : buckets_) {
    const auto start = std::chrono::steady_clock::now();
    bucket->work->wait();
    comm_time_ += std::chrono::steady_clock::now() - start;
    for (size_t slot = 0; slot < bucket->params.size(); ++slot) {
      at::Tensor& p = params_[bucket->params[slot]];
      p.mutable_grad() = bucket->flat.narrow(0, bucket->offsets[slot], p.numel()).view(p.sizes());
    }
  }
  startOver();
}

// Ready for the next backward: no bucket filled or started.
void GradientSync::startOver() {
  for (auto& bucket : buckets_) {
    bucket->work.reset();
    bucket->ready = 0;
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_launch_ = 0;
  pending_ = false;
}

}  // namespace accel::sync
