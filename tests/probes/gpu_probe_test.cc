#include "probes/gpu_probe.h"

#include <dlfcn.h>

#include <gtest/gtest.h>

namespace accel::probes {
namespace {

TEST(GpuProbeTest, NcclVersionCodes) {
  EXPECT_EQ(ncclVersionString(22809), "2.28.9");
  EXPECT_EQ(ncclVersionString(21903), "2.19.3");
  EXPECT_EQ(ncclVersionString(2708), "2.7.8");
}

TEST(GpuProbeTest, CudaVersionCodes) {
  EXPECT_EQ(cudaVersionString(13000), "13.0");
  EXPECT_EQ(cudaVersionString(12040), "12.4");
}

TEST(GpuProbeTest, ReportIsConsistentWithWhatCanBeLoaded) {
  GpuInfo info = probeGpus();
  void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    EXPECT_FALSE(info.cuda_usable);
    EXPECT_EQ(info.cuda_status, "no NVIDIA driver (libcuda.so.1 not found)");
    EXPECT_TRUE(info.devices.empty());
  } else {
    ::dlclose(cuda);
    EXPECT_EQ(info.cuda_usable, !info.devices.empty());
    for (const auto& d : info.devices) EXPECT_FALSE(d.name.empty());
  }
  void* nccl = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  EXPECT_EQ(info.nccl_version.has_value(), nccl != nullptr) << info.nccl_status;
  if (nccl) ::dlclose(nccl);
}

}  // namespace
}  // namespace accel::probes
