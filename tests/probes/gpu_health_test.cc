// GpuHealth (probes/gpu_health.h) through a fake NVML (fake_nvml.cc), loaded as the real one is.
#include "probes/gpu_health.h"

#include <stdlib.h>

#include <gtest/gtest.h>

namespace accel::probes {
namespace {

class GpuHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"FAKE_NVML_INIT", "FAKE_NVML_GPUS", "FAKE_NVML_ECC", "FAKE_NVML_PAGES", "FAKE_NVML_REMAP",
          "FAKE_NVML_CLOCKS", "FAKE_NVML_XID", "FAKE_NVML_NO_PAGES"})
      ::unsetenv(v);
  }
  static std::string names(const std::vector<HealthCheck>& checks) {
    std::string out;
    for (const auto& c : checks)
      out += (out.empty() ? "" : ", ") + c.name + (c.passed ? " ok" : " FAILED: " + c.detail);
    return out;
  }
};

TEST_F(GpuHealthTest, HealthyGpusPassEachCheckAndTheCount) {
  ::setenv("FAKE_NVML_GPUS", "2", 1);
  GpuHealth gpus(2, ACCEL_FAKE_NVML);
  const auto checks = gpus.check();
  EXPECT_EQ(names(checks), "gpus ok, gpu 0 ok, gpu 1 ok");
  EXPECT_EQ(checks[0].detail, "2 visible, 2 expected");
  EXPECT_EQ(checks[1].detail, "no fault in ECC errors, retired pages, row remaps, clock slowdowns");
}

// A check NVML does not support on a GPU (an H200 has no page retirement: it remaps rows) is
// named as not reported, and the GPU passes on the others.
TEST_F(GpuHealthTest, AHealthyGpuSaysWhatNvmlDoesNotReportOnIt) {
  ::setenv("FAKE_NVML_GPUS", "1", 1);
  ::setenv("FAKE_NVML_NO_PAGES", "1", 1);
  GpuHealth gpus(1, ACCEL_FAKE_NVML);
  const auto checks = gpus.check();
  EXPECT_EQ(names(checks), "gpus ok, gpu 0 ok");
  EXPECT_EQ(checks[1].detail,
            "no fault in ECC errors, row remaps, clock slowdowns (NVML reports no retired pages on "
            "it)");
}

TEST_F(GpuHealthTest, EachKindOfFaultFailsItsGpuAndSaysWhy) {
  ::setenv("FAKE_NVML_GPUS", "4", 1);
  ::setenv("FAKE_NVML_ECC", "0:2", 1);
  ::setenv("FAKE_NVML_PAGES", "1", 1);
  ::setenv("FAKE_NVML_REMAP", "2:1:1", 1);
  ::setenv("FAKE_NVML_CLOCKS", "3:48", 1);  // hardware slowdown (0x8) and thermal (0x40)
  GpuHealth gpus(0, ACCEL_FAKE_NVML);
  EXPECT_EQ(names(gpus.check()),
            "gpus ok, gpu 0 FAILED: 2 uncorrectable ECC errors since the driver loaded, gpu 1 "
            "FAILED: retired pages pending (a reset is needed), gpu 2 FAILED: a row remap failed; "
            "row remaps pending (a reset is needed), gpu 3 FAILED: hardware slowdown (clocks held "
            "down); thermal slowdown");
  // Fixed (a reset): the next round's checks pass.
  for (const char* v : {"FAKE_NVML_ECC", "FAKE_NVML_PAGES", "FAKE_NVML_REMAP", "FAKE_NVML_CLOCKS"})
    ::unsetenv(v);
  EXPECT_EQ(names(gpus.check()), "gpus ok, gpu 0 ok, gpu 1 ok, gpu 2 ok, gpu 3 ok");
}

// An XID critical error fails its GPU at the next round's checks, once: the first checks register
// for them, and each later one reports those since the one before.
TEST_F(GpuHealthTest, AnXidSinceTheLastRoundFailsItsGpuOnce) {
  ::setenv("FAKE_NVML_GPUS", "2", 1);
  GpuHealth gpus(2, ACCEL_FAKE_NVML);
  EXPECT_EQ(names(gpus.check()), "gpus ok, gpu 0 ok, gpu 1 ok");
  ::setenv("FAKE_NVML_XID", "1:79", 1);
  EXPECT_EQ(names(gpus.check()),
            "gpus ok, gpu 0 ok, gpu 1 FAILED: XID 79 since the last round's checks");
  EXPECT_EQ(names(gpus.check()), "gpus ok, gpu 0 ok, gpu 1 ok");
}

TEST_F(GpuHealthTest, FewerGpusThanExpectedFailTheCount) {
  ::setenv("FAKE_NVML_GPUS", "7", 1);
  GpuHealth gpus(8, ACCEL_FAKE_NVML);
  const auto checks = gpus.check();
  ASSERT_FALSE(checks.empty());
  EXPECT_FALSE(checks[0].passed);
  EXPECT_EQ(checks[0].detail, "7 visible, 8 expected");
  EXPECT_EQ(*firstFailure(checks), "gpus failed: 7 visible, 8 expected");
}

// No NVML, or no driver: nothing to check on a machine without GPUs; a failed count where the job
// expects them.
TEST_F(GpuHealthTest, WithoutNvmlOrADriverOnlyAJobThatExpectsGpusFails) {
  EXPECT_TRUE(GpuHealth(0, "libnvidia-ml-not-here.so.1").check().empty());
  auto missing = GpuHealth(2, "libnvidia-ml-not-here.so.1").check();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].detail, "NVML (libnvidia-ml.so.1) is not installed; 2 expected");
  ::setenv("FAKE_NVML_INIT", "9", 1);  // NVML_ERROR_DRIVER_NOT_LOADED
  EXPECT_TRUE(GpuHealth(0, ACCEL_FAKE_NVML).check().empty());
  auto noDriver = GpuHealth(1, ACCEL_FAKE_NVML).check();
  ASSERT_EQ(noDriver.size(), 1u);
  EXPECT_EQ(noDriver[0].detail, "no NVIDIA driver is loaded; 1 expected");
}

}  // namespace
}  // namespace accel::probes
