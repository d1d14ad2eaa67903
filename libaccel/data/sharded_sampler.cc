#include <algorithm>
#include <numeric>
#include <random>

#include "accel/data.h"
#include "accel/error.h"

namespace accel {

ShardedBatchSampler::ShardedBatchSampler(ShardOptions options, int rank, int worldSize)
    : options_(options), rank_(rank), world_(worldSize) {
  ACCEL_CHECK(options_.batch_size > 0, "batch_size must be positive");
  ACCEL_CHECK(worldSize > 0 && rank >= 0 && rank < worldSize, "rank ", rank,
              " is not in a world of ", worldSize);
}

std::vector<size_t> ShardedBatchSampler::order() const {
  std::vector<size_t> idx(options_.dataset_size);
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (options_.shuffle) {
    std::mt19937_64 rng(options_.seed + epoch_);
    std::shuffle(idx.begin(), idx.end(), rng);
  }
  return idx;
}

size_t ShardedBatchSampler::size() const {
  const size_t n = options_.dataset_size, bs = options_.batch_size, w = static_cast<size_t>(world_);
  if (n == 0) return 0;
  if (options_.drop_last) {
    size_t full = n / bs;
    return full / w + (static_cast<size_t>(rank_) < full % w && !options_.even_batches ? 1 : 0);
  }
  if (options_.even_batches) return (n + bs * w - 1) / (bs * w);
  size_t batches = (n + bs - 1) / bs;
  return batches / w + (static_cast<size_t>(rank_) < batches % w ? 1 : 0);
}

std::vector<std::vector<size_t>> ShardedBatchSampler::batches() const {
  std::vector<size_t> idx = order();
  const size_t bs = options_.batch_size, w = static_cast<size_t>(world_);
  std::vector<std::vector<size_t>> out;
  if (idx.empty()) return out;
  if (options_.even_batches && !options_.drop_last) {
    // Wrap around to the first samples until every rank has the same number of full batches.
    const size_t perRank = size();
    const size_t total = perRank * bs * w;
    for (size_t i = 0; idx.size() < total; ++i) idx.push_back(idx[i % options_.dataset_size]);
  }
  size_t global = 0;
  for (size_t start = 0; start < idx.size(); start += bs, ++global) {
    size_t end = std::min(start + bs, idx.size());
    if (end - start < bs && options_.drop_last) break;
    if (global % w == static_cast<size_t>(rank_))
      out.emplace_back(idx.begin() + static_cast<long>(start),
                       idx.begin() + static_cast<long>(end));
  }
  if (options_.drop_last && options_.even_batches) out.resize(std::min(out.size(), size()));
  return out;
}

size_t ShardedBatchSampler::remainder() const {
  if (!options_.even_batches || options_.drop_last) return 0;
  return options_.dataset_size % (options_.batch_size * static_cast<size_t>(world_));
}

std::pair<size_t, size_t> splitBetweenProcesses(size_t count, int rank, int worldSize) {
  const size_t w = static_cast<size_t>(worldSize), r = static_cast<size_t>(rank);
  const size_t q = count / w, extra = count % w;
  const size_t begin = r * q + std::min(r, extra);
  return {begin, begin + q + (r < extra ? 1 : 0)};
}

}  // namespace accel
