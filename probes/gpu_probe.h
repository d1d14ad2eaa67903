#pragma once
// GPUs, CUDA and NCCL as seen at run time through dlopen, so `accel` links none of them and
// runs on machines without them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel::probes {

struct GpuDevice {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  std::string pci_bus_id;  // as the driver API spells it, "0000:3B:00.0"; empty when unknown
};

struct GpuInfo {
  bool cuda_usable = false;  // the driver loaded, initialised and reports ≥ 1 device
  std::string cuda_status;   // why not usable, or "ok"
  std::optional<int> driver_cuda_version;     // cuDriverGetVersion, e.g. 13000
  std::optional<std::string> driver_version;  // NVML's driver version string, e.g. "580.65.06"
  std::vector<GpuDevice> devices;
  std::optional<std::string> nccl_version;  // "2.28.9" from libnccl.so.2's ncclGetVersion
  std::string nccl_status;                  // why absent, or "ok"
};

// Probes libcuda.so.1 (driver API), libnvidia-ml.so.1 and libnccl.so.2. Never throws; on a
// machine without a driver it returns in milliseconds.
GpuInfo probeGpus();

// Only the CUDA part of probeGpus (no NVML, no NCCL): the number of usable GPUs, 0 without a
// driver. For launch-time checks, where every millisecond counts.
int countUsableGpus();

// The PCI bus id of each CUDA device, by device index in this process's view (its
// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, which the workers inherit); empty without a usable
// driver, "" for a device whose id the driver does not give. Only the driver API (no NVML, no
// NCCL); never throws.
std::vector<std::string> gpuPciBusIds();

// "2.28.9" for NCCL's version code 22809 (and the pre-2.9 scheme 2708 → "2.7.8").
std::string ncclVersionString(int code);

// "13.0" for CUDA's version code 13000.
std::string cudaVersionString(int code);

}  // namespace accel::probes
