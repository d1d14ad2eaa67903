#pragma once
// A machine's GPUs before it meets the others for a round (issue 53), through NVML loaded at run
// time (libnvidia-ml.so.1: nothing NVIDIA is needed to build accel, and a machine without it has
// no GPU to check): the GPUs the job expects are visible, and for each GPU no uncorrectable ECC
// error since the driver loaded, no retired page pending, no row remap pending or failed, no XID
// critical error since the last round's checks, no hardware or thermal slowdown now.
//
// Thread-safety: one GpuHealth is called from one thread at a time (the agent's main thread, as
// meet() is). No call throws; NVML's own failures become failed checks with NVML's error code.

#include <memory>
#include <string>
#include <vector>

#include "probes/health.h"

namespace accel::probes {

class GpuHealth {
 public:
  // `library`: the NVML to load (a test's fake elsewhere). `expected`: how many GPUs the job's
  // workers use on this machine (0: none expected, the count is not checked).
  explicit GpuHealth(int expected, std::string library = "libnvidia-ml.so.1");
  ~GpuHealth();  // nvmlShutdown, and the library closed
  GpuHealth(const GpuHealth&) = delete;
  GpuHealth& operator=(const GpuHealth&) = delete;

  // "gpus" (the count) and one "gpu N" per device. None where NVML cannot be loaded or finds no
  // driver, unless GPUs are expected (then "gpus" fails, saying why). The first call registers
  // for XID events; later calls report those that came since the call before.
  std::vector<HealthCheck> check();

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  const int expected_;
};

}  // namespace accel::probes
