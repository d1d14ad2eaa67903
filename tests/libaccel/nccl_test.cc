// The NCCL communicator (built when CUDA and NCCL were found). Needs an NVIDIA GPU: skipped,
// with the reason, where none is usable. One GPU gives a world of one rank (NCCL does not put
// two ranks on one device), which still runs every staging copy and NCCL call.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include "libaccel/comm/nccl_communicator.h"

namespace accel::comm {
namespace {

TEST(NcclCommunicatorTest, CollectivesOnOneGpu) {
  std::string why = cudaUnavailableReason();
  if (!why.empty()) GTEST_SKIP() << "no usable NVIDIA GPU: " << why;
  auto comm = makeNcclCommunicator(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0,
                                   std::chrono::seconds(30));
  auto t = torch::arange(1000, torch::kFloat);
  auto expected = t.clone();
  comm->allreduceAsync(t, ReduceOp::Sum)->wait();
  EXPECT_TRUE(torch::equal(t, expected));
  auto b = torch::full({4}, 3.0, torch::kBFloat16);
  comm->broadcast(b, 0);
  EXPECT_EQ(b[0].item<float>(), 3.0f);
  auto parts = comm->allgather(torch::tensor({7, 8}, torch::kLong));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0][1].item<int64_t>(), 8);
  comm->barrier();
}

}  // namespace
}  // namespace accel::comm
