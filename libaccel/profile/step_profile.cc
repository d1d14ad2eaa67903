#include "accel/step_profile.h"

#include <cstdio>
#include <type_traits>
#include <utility>

#include <c10/core/impl/VirtualGuardImpl.h>

namespace accel {
namespace {

// c10::Event::elapsedTime and synchronize came with LibTorch 2.x's device-generic events;
// LibTorch 1.13 has neither, and there every mark reads the wall clock.
template <typename E, typename = void>
struct HasElapsedTime : std::false_type {};
template <typename E>
struct HasElapsedTime<
    E, std::void_t<decltype(std::declval<const E&>().elapsedTime(std::declval<const E&>())),
                   decltype(std::declval<const E&>().synchronize())>> : std::true_type {};
constexpr bool kTimedEvents = HasElapsedTime<c10::Event>::value;

template <typename E>
double elapsedMs(const E& from, const E& to) {
  if constexpr (HasElapsedTime<E>::value) {
    return from.elapsedTime(to);
  } else {
    return 0;  // never reached: without it, marks read the wall clock
  }
}

template <typename E>
void waitFor(const E& event) {
  if constexpr (HasElapsedTime<E>::value) event.synchronize();
}

double clockMs(std::chrono::steady_clock::time_point from,
               std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

const char* stepPhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::Data:
      return "data";
    case StepPhase::Forward:
      return "forward";
    case StepPhase::Backward:
      return "backward";
    case StepPhase::Sync:
      return "sync";
    case StepPhase::Optimizer:
      return "optimizer";
  }
  return "?";
}

bool StepProfile::deviceEventsFor(const c10::Device& device) {
  return kTimedEvents && device.is_cuda();
}

StepProfile::StepProfile(const c10::Device& device, int64_t skipSteps)
    : device_(device), device_events_(deviceEventsFor(device)), skip_(skipSteps) {
  sum_.device_events = device_events_;
}

StepProfile::~StepProfile() = default;

StepProfile::Mark StepProfile::newMark(StepPhase phase) {
  Mark mark;
  if (!spare_.empty()) {
    mark = std::move(spare_.back());
    spare_.pop_back();
  }
  mark.phase = phase;
  if (device_events_) {
    // BACKEND_DEFAULT: an event that keeps time (PyTorch's default flag disables timing).
    if (!mark.event)
      mark.event = std::make_unique<c10::Event>(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
    c10::impl::VirtualGuardImpl guard(device_.type());
    mark.event->record(guard.getStream(device_));
  } else {
    mark.clock = std::chrono::steady_clock::now();
  }
  return mark;
}

void StepProfile::beginStep() {
  // Steps the device finished (the next one began) are accounted for now, their events reused:
  // a long run keeps a few steps' events, and reading them never waits.
  while (pending_.size() > 1 && finished(pending_[1].marks.front())) {
    account(pending_.front(), &pending_[1].marks.front());
    recycle(pending_.front());
    pending_.pop_front();
  }
  Step step;
  step.marks.push_back(newMark(StepPhase::Data));
  pending_.push_back(std::move(step));
  ++begun_;
}

void StepProfile::mark(StepPhase phase) {
  if (pending_.empty()) return;  // before the first beginStep(): nothing to attribute it to
  pending_.back().marks.push_back(newMark(phase));
}

bool StepProfile::finished(const Mark& mark) const {
  return !device_events_ || mark.event->query();
}

// A step lasts from its beginning to the next one's (to its own last mark for the last step):
// what lies after its last mark (the loop's own work) is "other".
void StepProfile::account(const Step& step, const Mark* next) {
  // begun_ counts the pending steps too: this one's index is begun_ - pending_.size().
  const int64_t index = begun_ - static_cast<int64_t>(pending_.size());
  if (index < skip_ || step.marks.size() < 2) return;
  const auto ms = [&](const Mark& a, const Mark& b) {
    return device_events_ ? elapsedMs(*a.event, *b.event) : clockMs(a.clock, b.clock);
  };
  for (size_t i = 1; i < step.marks.size(); ++i)
    sum_.ms[static_cast<size_t>(step.marks[i].phase)] += ms(step.marks[i - 1], step.marks[i]);
  sum_.step_ms += ms(step.marks.front(), next ? *next : step.marks.back());
  ++sum_.steps;
}

void StepProfile::recycle(Step& step) {
  for (auto& mark : step.marks) spare_.push_back(std::move(mark));
  step.marks.clear();
}

StepProfile::Report StepProfile::report() {
  if (!pending_.empty() && device_events_) waitFor(*pending_.back().marks.back().event);
  while (!pending_.empty()) {
    account(pending_.front(), pending_.size() > 1 ? &pending_[1].marks.front() : nullptr);
    recycle(pending_.front());
    pending_.pop_front();
  }
  Report r = sum_;
  if (r.steps > 0) {
    for (auto& v : r.ms) v /= static_cast<double>(r.steps);
    r.step_ms /= static_cast<double>(r.steps);
  }
  return r;
}

double StepProfile::Report::otherMs() const {
  double phases = 0;
  for (double v : ms) phases += v;
  return step_ms - phases;
}

std::string StepProfile::Report::text() const {
  std::string out;
  char part[64];
  for (size_t i = 0; i < kStepPhases; ++i) {
    std::snprintf(part, sizeof part, "%s %.3f, ", stepPhaseName(static_cast<StepPhase>(i)), ms[i]);
    out += part;
  }
  std::snprintf(part, sizeof part, "other %.3f (step %.3f)", otherMs(), step_ms);
  return out + part;
}

}  // namespace accel
