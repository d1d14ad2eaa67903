#include "probes/gpu_probe.h"

#include "probes/dynamic_library.h"

namespace accel::probes {
namespace {

// CUDA driver API signatures (cuda.h), declared here so nothing CUDA is needed to build.
using CuInit = int (*)(unsigned);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceTotalMem = int (*)(size_t*, int);
using CuDeviceGetPciBusId = int (*)(char*, int, int);
using CuGetErrorString = int (*)(int, const char**);
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlSystemGetDriverVersion = int (*)(char*, unsigned);
using NcclGetVersion = int (*)(int*);

void probeCuda(GpuInfo& info) {
  SignalsBlocked blocked;
  Library cuda("libcuda.so.1");
  if (!cuda.loaded()) {
    info.cuda_status = "no NVIDIA driver (libcuda.so.1 not found)";
    return;
  }
  auto init = cuda.symbol<CuInit>("cuInit");
  auto driverVersion = cuda.symbol<CuDriverGetVersion>("cuDriverGetVersion");
  auto count = cuda.symbol<CuDeviceGetCount>("cuDeviceGetCount");
  auto get = cuda.symbol<CuDeviceGet>("cuDeviceGet");
  auto name = cuda.symbol<CuDeviceGetName>("cuDeviceGetName");
  auto totalMem = cuda.symbol<CuDeviceTotalMem>("cuDeviceTotalMem_v2");
  auto errorString = cuda.symbol<CuGetErrorString>("cuGetErrorString");
  auto busId = cuda.symbol<CuDeviceGetPciBusId>("cuDeviceGetPCIBusId");
  if (!init || !count || !get || !name || !totalMem) {
    info.cuda_status = "libcuda.so.1 lacks the driver API entry points";
    return;
  }
  if (driverVersion) {
    int v = 0;
    if (driverVersion(&v) == 0) info.driver_cuda_version = v;
  }
  if (int rc = init(0); rc != 0) {
    const char* text = nullptr;
    if (errorString) errorString(rc, &text);
    info.cuda_status = "cuInit failed: " + std::string(text ? text : "error " + std::to_string(rc));
    return;
  }
  int n = 0;
  if (count(&n) != 0 || n == 0) {
    info.cuda_status = "the driver reports no CUDA devices";
    return;
  }
  for (int i = 0; i < n; ++i) {
    int device = 0;
    if (get(&device, i) != 0) continue;
    GpuDevice d;
    d.index = i;
    char buf[256] = {0};
    if (name(buf, sizeof buf - 1, device) == 0) d.name = buf;
    size_t bytes = 0;
    if (totalMem(&bytes, device) == 0) d.memory_bytes = bytes;
    char bus[64] = {0};
    if (busId && busId(bus, sizeof bus - 1, device) == 0) d.pci_bus_id = bus;
    info.devices.push_back(d);
  }
  info.cuda_usable = !info.devices.empty();
  info.cuda_status = info.cuda_usable ? "ok" : "no device could be queried";
}

void probeNvml(GpuInfo& info) {
  SignalsBlocked blocked;
  Library nvml("libnvidia-ml.so.1");
  auto init = nvml.symbol<NvmlInit>("nvmlInit_v2");
  auto shutdown = nvml.symbol<NvmlShutdown>("nvmlShutdown");
  auto version = nvml.symbol<NvmlSystemGetDriverVersion>("nvmlSystemGetDriverVersion");
  if (!init || !version || init() != 0) return;
  char buf[96] = {0};
  if (version(buf, sizeof buf) == 0) info.driver_version = buf;
  if (shutdown) shutdown();
}

void probeNccl(GpuInfo& info) {
  SignalsBlocked blocked;
  Library nccl("libnccl.so.2");
  if (!nccl.loaded()) {
    info.nccl_status = "libnccl.so.2 not found";
    return;
  }
  auto version = nccl.symbol<NcclGetVersion>("ncclGetVersion");
  int code = 0;
  if (!version || version(&code) != 0) {
    info.nccl_status = "ncclGetVersion failed";
    return;
  }
  info.nccl_version = ncclVersionString(code);
  info.nccl_status = "ok";
}

}  // namespace

std::string ncclVersionString(int code) {
  int major, minor, patch;
  if (code >= 10000) {  // NCCL ≥ 2.9: major*10000 + minor*100 + patch
    major = code / 10000;
    minor = (code % 10000) / 100;
    patch = code % 100;
  } else {  // older: major*1000 + minor*100 + patch
    major = code / 1000;
    minor = (code % 1000) / 100;
    patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cudaVersionString(int code) {
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

int countUsableGpus() {
  GpuInfo info;
  probeCuda(info);
  return static_cast<int>(info.devices.size());
}

std::vector<std::string> gpuPciBusIds() {
  GpuInfo info;
  probeCuda(info);
  std::vector<std::string> ids;
  for (const GpuDevice& d : info.devices) {
    if (d.index >= static_cast<int>(ids.size())) ids.resize(static_cast<size_t>(d.index) + 1);
    ids[static_cast<size_t>(d.index)] = d.pci_bus_id;
  }
  return ids;
}

GpuInfo probeGpus() {
  GpuInfo info;
  probeCuda(info);
  if (info.cuda_usable) probeNvml(info);
  probeNccl(info);
  return info;
}

}  // namespace accel::probes
