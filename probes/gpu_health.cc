#include "probes/gpu_health.h"

#include <chrono>
#include <map>

#include "probes/dynamic_library.h"

namespace accel::probes {
namespace {

// NVML's types and values (nvml.h), declared here so nothing NVIDIA is needed to build.
using Device = struct NvmlDevice*;
using EventSet = struct NvmlEventSet*;
struct EventData {
  Device device;
  unsigned long long type;
  unsigned long long data;  // the XID
  unsigned gpu_instance;
  unsigned compute_instance;
};
constexpr int kSuccess = 0;
constexpr int kDriverNotLoaded = 9;
constexpr int kUncorrected = 1;                   // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                   // NVML_VOLATILE_ECC: since the driver loaded
constexpr unsigned long long kXidCritical = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned long long kHwSlowdown = 0x8;   // clocks event reasons that mean a sick GPU
constexpr unsigned long long kSwThermal = 0x20;
constexpr unsigned long long kHwThermal = 0x40;
constexpr unsigned long long kHwPowerBrake = 0x80;

using Init = int (*)();
using Shutdown = int (*)();
using GetCount = int (*)(unsigned*);
using GetHandle = int (*)(unsigned, Device*);
using GetEcc = int (*)(Device, int, int, unsigned long long*);
using GetPendingPages = int (*)(Device, int*);
using GetRemappedRows = int (*)(Device, unsigned*, unsigned*, unsigned*, unsigned*);
using GetThrottle = int (*)(Device, unsigned long long*);
using EventSetCreate = int (*)(EventSet*);
using RegisterEvents = int (*)(Device, unsigned long long, EventSet);
using EventSetWait = int (*)(EventSet, EventData*, unsigned);

std::string nvmlError(const char* call, int code) {
  return std::string(call) + " failed (NVML error " + std::to_string(code) + ")";
}

// One GPU as NVML answered: what is wrong ("" when nothing), the checks it answered and those it
// does not support there.
struct DeviceLook {
  std::string problems;
  std::string answered;
  std::string unanswered;
};

void listed(std::string& list, const char* what) {
  list += (list.empty() ? "" : ", ") + std::string(what);
}

// A GPU check's detail: its problems, or what was looked at and found well.
std::string passedDetail(const DeviceLook& l) {
  if (!l.problems.empty()) return l.problems;
  if (l.answered.empty()) return "NVML answers none of the checks on it";
  return "no fault in " + l.answered +
         (l.unanswered.empty() ? "" : " (NVML reports no " + l.unanswered + " on it)");
}

}  // namespace

struct GpuHealth::Nvml {
  explicit Nvml(const std::string& name) : library(name.c_str()) {}
  Library library;
  bool initialised = false;
  int init_error = 0;  // nvmlInit's, when it failed
  EventSet events = nullptr;
  bool registered = false;

  template <typename F>
  F get(const char* name) const {
    return library.symbol<F>(name);
  }
  DeviceLook look(Device device) const;
  std::map<unsigned, std::string> xidsSinceLastLook(unsigned count);
};

GpuHealth::GpuHealth(int expected, std::string library)
    : nvml_(std::make_unique<Nvml>(library)), expected_(expected) {
  SignalsBlocked blocked;  // the driver may start threads: none may take the agent's signals
  auto init = nvml_->get<Init>("nvmlInit_v2");
  if (!init) return;
  nvml_->init_error = init();
  nvml_->initialised = nvml_->init_error == kSuccess;
}

GpuHealth::~GpuHealth() {
  if (!nvml_->initialised) return;
  if (auto shutdown = nvml_->get<Shutdown>("nvmlShutdown")) shutdown();
}

// What is wrong with one GPU ("" when nothing), and what NVML answered on it: each check that
// NVML supports there (an H200 reports no retired pages, say: it remaps rows instead).
DeviceLook GpuHealth::Nvml::look(Device device) const {
  DeviceLook l;
  auto add = [&l](const std::string& p) { l.problems += (l.problems.empty() ? "" : "; ") + p; };
  auto asked = [&l](const char* what, bool answered) {
    listed(answered ? l.answered : l.unanswered, what);
    return answered;
  };
  unsigned long long ecc = 0;
  auto eccOf = get<GetEcc>("nvmlDeviceGetTotalEccErrors");
  if (asked("ECC errors", eccOf && eccOf(device, kUncorrected, kVolatileEcc, &ecc) == kSuccess) &&
      ecc > 0)
    add(std::to_string(ecc) + " uncorrectable ECC errors since the driver loaded");
  int pending = 0;
  auto pagesOf = get<GetPendingPages>("nvmlDeviceGetRetiredPagesPendingStatus");
  if (asked("retired pages", pagesOf && pagesOf(device, &pending) == kSuccess) && pending)
    add("retired pages pending (a reset is needed)");
  unsigned corrected = 0, uncorrected = 0, remapPending = 0, remapFailed = 0;
  auto rowsOf = get<GetRemappedRows>("nvmlDeviceGetRemappedRows");
  if (asked("row remaps", rowsOf && rowsOf(device, &corrected, &uncorrected, &remapPending,
                                           &remapFailed) == kSuccess)) {
    if (remapFailed) add("a row remap failed");
    if (remapPending) add("row remaps pending (a reset is needed)");
  }
  unsigned long long reasons = 0;
  auto throttle = get<GetThrottle>("nvmlDeviceGetCurrentClocksEventReasons");
  if (!throttle) throttle = get<GetThrottle>("nvmlDeviceGetCurrentClocksThrottleReasons");
  if (asked("clock slowdowns", throttle && throttle(device, &reasons) == kSuccess)) {
    if (reasons & (kHwSlowdown | kHwPowerBrake)) add("hardware slowdown (clocks held down)");
    if (reasons & (kSwThermal | kHwThermal)) add("thermal slowdown");
  }
  return l;
}

// The XID critical errors NVML reported since the last look, by GPU index (the first look
// registers for them; NVML keeps what comes between looks).
std::map<unsigned, std::string> GpuHealth::Nvml::xidsSinceLastLook(unsigned count) {
  std::map<unsigned, std::string> xids;
  auto create = get<EventSetCreate>("nvmlEventSetCreate");
  auto reg = get<RegisterEvents>("nvmlDeviceRegisterEvents");
  auto wait = get<EventSetWait>("nvmlEventSetWait_v2");
  auto handle = get<GetHandle>("nvmlDeviceGetHandleByIndex_v2");
  if (!create || !reg || !wait || !handle) return xids;
  if (!registered) {
    registered = true;
    if (create(&events) != kSuccess) return xids;
    for (unsigned i = 0; i < count; ++i) {
      Device d = nullptr;
      if (handle(i, &d) == kSuccess) reg(d, kXidCritical, events);  // unsupported: no events
    }
    return xids;
  }
  if (!events) return xids;
  std::map<Device, unsigned> indexOf;
  for (unsigned i = 0; i < count; ++i) {
    Device d = nullptr;
    if (handle(i, &d) == kSuccess) indexOf[d] = i;
  }
  EventData e{};
  for (int n = 0; n < 1000 && wait(events, &e, 0) == kSuccess; ++n) {
    if (!(e.type & kXidCritical)) continue;
    auto& text = xids[indexOf.count(e.device) ? indexOf[e.device] : 0];
    text += (text.empty() ? "XID " : ", ") + std::to_string(e.data);
  }
  return xids;
}

std::vector<HealthCheck> GpuHealth::check() {
  std::vector<HealthCheck> checks;
  const auto start = std::chrono::steady_clock::now();
  auto took = [&start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  };
  unsigned count = 0;
  auto getCount = nvml_->get<GetCount>("nvmlDeviceGetCount_v2");
  const int countError = nvml_->initialised && getCount ? getCount(&count) : -1;
  if (!nvml_->initialised || countError != kSuccess) {
    if (expected_ <= 0) return checks;  // no GPU expected: a machine without NVML or a driver
    std::string why = !nvml_->library.loaded() ? "NVML (libnvidia-ml.so.1) is not installed"
                      : nvml_->init_error == kDriverNotLoaded ? "no NVIDIA driver is loaded"
                      : !nvml_->initialised ? nvmlError("nvmlInit", nvml_->init_error)
                                            : nvmlError("nvmlDeviceGetCount", countError);
    checks.push_back({"gpus", false, why + "; " + std::to_string(expected_) + " expected", took()});
    return checks;
  }
  const bool enough = expected_ <= 0 || static_cast<int>(count) >= expected_;
  checks.push_back({"gpus", enough,
                    std::to_string(count) + " visible" +
                        (expected_ > 0 ? ", " + std::to_string(expected_) + " expected" : ""),
                    took()});
  const auto xids = nvml_->xidsSinceLastLook(count);
  auto handle = nvml_->get<GetHandle>("nvmlDeviceGetHandleByIndex_v2");
  for (unsigned i = 0; i < count && handle; ++i) {
    const auto deviceStart = std::chrono::steady_clock::now();
    Device d = nullptr;
    const int error = handle(i, &d);
    DeviceLook l;
    if (error == kSuccess) {
      l = nvml_->look(d);
    } else {
      l.problems = nvmlError("nvmlDeviceGetHandleByIndex", error);
    }
    if (auto x = xids.find(i); x != xids.end())
      l.problems += (l.problems.empty() ? "" : "; ") + x->second + " since the last round's checks";
    checks.push_back({"gpu " + std::to_string(i), l.problems.empty(), passedDetail(l),
                      std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - deviceStart)});
  }
  return checks;
}

}  // namespace accel::probes
