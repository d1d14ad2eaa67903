#pragma once
// accel::StepProfile: where a training step's time goes — data, forward, backward, waiting for
// the gradients' all-reduces, optimizer — averaged over the steps after the first few.
//
// On a CUDA device (with a LibTorch whose device events can be timed, 2.x) each mark records an
// event on the device's current stream, so a phase's time is the device's: from the end of the
// phase before to the end of this one, waiting for the host to launch the work included (a
// device that starves shows it there). Elsewhere each mark reads the wall clock on the calling
// thread. Events are read back lazily (a finished step's at the next beginStep()), so profiling
// adds no synchronisation to a step.
//
//   accel::StepProfile profile(acc.device());
//   acc.profileSteps(&profile);                    // backward(), step() mark their phases
//   for (...) {
//     profile.beginStep();
//     ...load the batch...;   profile.mark(accel::StepPhase::Data);
//     ...forward, loss...;    profile.mark(accel::StepPhase::Forward);
//     acc.backward(loss);     acc.step();
//   }
//   auto report = profile.report();                // waits for the device
//
// Not thread-safe: one thread marks, the one that launches the step's work.

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Event.h>

namespace accel {

enum class StepPhase { Data, Forward, Backward, Sync, Optimizer };
inline constexpr size_t kStepPhases = 5;
const char* stepPhaseName(StepPhase phase);

class StepProfile {
 public:
  // The first `skipSteps` steps (allocations, kernel loading, autotuning) are left out.
  explicit StepProfile(const c10::Device& device, int64_t skipSteps = 1);
  ~StepProfile();
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  // A step starts: the time until the first mark is its first phase's.
  void beginStep();
  // `phase` ended now. A phase marked twice in a step adds both parts; one not marked took 0.
  void mark(StepPhase phase);

  struct Report {
    int64_t steps = 0;                     // steps measured (after the skipped ones)
    std::array<double, kStepPhases> ms{};  // per step, by StepPhase
    double step_ms = 0;                    // per step, from beginStep() to the next one's
    bool device_events = false;            // CUDA events, else the wall clock
    double otherMs() const;                // step_ms minus the phases: after a step's last
                                           // mark, before the next step began
    // "data 0.05, forward 0.40, backward 0.90, sync 0.00, optimizer 0.20, other 0.01 (step 1.56)"
    std::string text() const;
  };
  // Waits for the device to finish the marked work; the averages so far.
  Report report();

  // Whether marks on `device` are timed with device events (else the wall clock).
  static bool deviceEventsFor(const c10::Device& device);

 private:
  struct Mark {
    StepPhase phase = StepPhase::Data;  // the phase it ends (marks[0]: none)
    std::unique_ptr<c10::Event> event;  // with device events
    std::chrono::steady_clock::time_point clock;
  };
  struct Step {
    std::vector<Mark> marks;  // marks[0]: the step's beginning
  };
  Mark newMark(StepPhase phase);
  bool finished(const Mark& mark) const;
  void account(const Step& step, const Mark* next);
  void recycle(Step& step);

  c10::Device device_;
  bool device_events_;
  int64_t skip_;
  int64_t begun_ = 0;
  std::deque<Step> pending_;  // begun, not yet accounted for (the last one may be open)
  std::vector<Mark> spare_;   // marks of accounted steps, their events reused
  Report sum_;
};

}  // namespace accel
