// A fake libnvidia-ml.so.1 for GpuHealth's tests (probes/gpu_health.h): NVML's calls that the
// checks make, with the GPUs' state read from the environment at each call, so a test changes a
// GPU between two rounds' checks with setenv:
//   FAKE_NVML_INIT      nvmlInit_v2's return code (default 0)
//   FAKE_NVML_GPUS      how many GPUs (default 0)
//   FAKE_NVML_ECC       "I:N": GPU I has N uncorrectable volatile ECC errors
//   FAKE_NVML_PAGES     "I": GPU I has retired pages pending
//   FAKE_NVML_NO_PAGES  set: no GPU reports retired pages (NOT_SUPPORTED, as on an H200)
//   FAKE_NVML_REMAP     "I:P:F": GPU I's row remaps pending P, failed F
//   FAKE_NVML_CLOCKS    "I:R": GPU I's clocks event reasons R (hexadecimal)
//   FAKE_NVML_XID       "I:X": one XID X on GPU I, delivered once (by the next wait after the
//                       variable changed)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Device {
  unsigned index;
};
Device devices[16] = {{0}, {1}, {2},  {3},  {4},  {5},  {6},  {7},
                      {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};
int eventSet = 0;
unsigned registered = 0;  // a bit per GPU registered for XIDs
std::string lastXid;

unsigned gpus() {
  const char* v = std::getenv("FAKE_NVML_GPUS");
  return v ? static_cast<unsigned>(std::atoi(v)) : 0;
}

// The numbers after "I:" of variable `name` when its GPU is `index` (as many as `n`).
bool forDevice(const char* name, unsigned index, unsigned long long* out, int n, int base = 10) {
  const char* v = std::getenv(name);
  if (!v || static_cast<unsigned>(std::atoi(v)) != index) return false;
  const char* p = std::strchr(v, ':');
  for (int i = 0; i < n; ++i) {
    if (!p) return false;
    out[i] = std::strtoull(p + 1, nullptr, base);
    p = std::strchr(p + 1, ':');
  }
  return true;
}

}  // namespace

struct FakeEventData {
  Device* device;
  unsigned long long type;
  unsigned long long data;
  unsigned gpu_instance;
  unsigned compute_instance;
};

extern "C" {

int nvmlInit_v2() {
  const char* v = std::getenv("FAKE_NVML_INIT");
  return v ? std::atoi(v) : 0;
}
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = gpus();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, Device** device) {
  if (index >= gpus()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[index];
  return 0;
}
int nvmlDeviceGetTotalEccErrors(Device* d, int type, int counter, unsigned long long* count) {
  if (type != 1 || counter != 0) return 2;
  unsigned long long n[1] = {0};
  *count = forDevice("FAKE_NVML_ECC", d->index, n, 1) ? n[0] : 0;
  return 0;
}
int nvmlDeviceGetRetiredPagesPendingStatus(Device* d, int* pending) {
  if (std::getenv("FAKE_NVML_NO_PAGES")) return 3;  // NVML_ERROR_NOT_SUPPORTED, as on an H200
  const char* v = std::getenv("FAKE_NVML_PAGES");
  *pending = v && static_cast<unsigned>(std::atoi(v)) == d->index;
  return 0;
}
int nvmlDeviceGetRemappedRows(Device* d, unsigned* corrected, unsigned* uncorrected,
                              unsigned* pending, unsigned* failed) {
  unsigned long long n[2] = {0, 0};
  forDevice("FAKE_NVML_REMAP", d->index, n, 2);
  *corrected = *uncorrected = 0;
  *pending = static_cast<unsigned>(n[0]);
  *failed = static_cast<unsigned>(n[1]);
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(Device* d, unsigned long long* reasons) {
  unsigned long long n[1] = {0};
  *reasons = forDevice("FAKE_NVML_CLOCKS", d->index, n, 1, 16) ? n[0] : 0;
  return 0;
}
int nvmlEventSetCreate(int** set) {
  *set = &eventSet;
  return 0;
}
int nvmlDeviceRegisterEvents(Device* d, unsigned long long types, int*) {
  if (types & 0x8) registered |= 1u << d->index;
  return 0;
}
int nvmlEventSetWait_v2(int*, FakeEventData* data, unsigned) {
  const char* v = std::getenv("FAKE_NVML_XID");
  if (!v || lastXid == v) return 10;  // NVML_ERROR_TIMEOUT: nothing new
  lastXid = v;
  unsigned long long n[1] = {0};
  const unsigned index = static_cast<unsigned>(std::atoi(v));
  if (!(registered & (1u << index)) || !forDevice("FAKE_NVML_XID", index, n, 1)) return 10;
  *data = {&devices[index], 0x8, n[0], 0, 0};
  return 0;
}

}  // extern "C"
