#pragma once
// Data sharding with accelerate's semantics (BatchSamplerShard without split_batches):
// the dataset's indices (shuffled per epoch with a seed every rank shares) are cut into
// batches, and batch i goes to rank i mod N. With even_batches the tail wraps around to the
// first samples so every rank gets the same number of full batches; gatherForMetrics then
// drops those duplicates so every sample is counted once.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel {

struct ShardOptions {
  size_t dataset_size = 0;
  size_t batch_size = 1;  // per rank
  bool shuffle = false;   // off: file order
  uint64_t seed = 0;      // the permutation of epoch e uses seed + e, the same on every rank
  bool even_batches = true;
  bool drop_last = false;
};

class ShardedBatchSampler {
 public:
  ShardedBatchSampler(ShardOptions options, int rank, int worldSize);

  // Reshuffles for `epoch` (no effect without shuffle).
  void setEpoch(uint64_t epoch) { epoch_ = epoch; }

  // This rank's batches of dataset indices for the current epoch.
  std::vector<std::vector<size_t>> batches() const;

  // Batches per epoch on this rank.
  size_t size() const;

  // How many samples of the last global step are real (not wrapped-around duplicates), over all
  // ranks; 0 when the last step is complete. What gatherForMetrics keeps of its last gather.
  size_t remainder() const;

  const ShardOptions& options() const { return options_; }

 private:
  std::vector<size_t> order() const;

  ShardOptions options_;
  int rank_;
  int world_;
  uint64_t epoch_ = 0;
};

// Contiguous share of `count` items for `rank`: extras go to the lowest ranks
// (accelerate's split_between_processes). Returns [begin, end).
std::pair<size_t, size_t> splitBetweenProcesses(size_t count, int rank, int worldSize);

}  // namespace accel
