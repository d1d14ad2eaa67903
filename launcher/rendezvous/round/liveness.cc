#include "launcher/rendezvous/round/liveness.h"

#include "launcher/base/text.h"

namespace accel::launcher {

Liveness::Liveness(int machines, int maxMachines, int self, const RoundTimeouts& timeouts,
                   time_point start)
    : timeouts_(timeouts),
      max_machines_(maxMachines),
      state_(static_cast<size_t>(machines), State::kWatched),
      count_(static_cast<size_t>(machines), -1),
      moved_(static_cast<size_t>(machines), start) {
  if (self >= 0 && self < machines) state_[static_cast<size_t>(self)] = State::kSelf;
}

bool Liveness::watching(int machine) const {
  return machine >= 0 && static_cast<size_t>(machine) < state_.size() &&
         state_[static_cast<size_t>(machine)] == State::kWatched;
}

std::optional<GroupChange> Liveness::presence(int machine, bool present,
                                              const std::function<bool()>& finished) {
  if (present) return std::nullopt;
  return gone(machine, "its agent is gone", finished);
}

std::optional<GroupChange> Liveness::gone(int machine, std::string how,
                                          const std::function<bool()>& finished) {
  if (!watching(machine)) return std::nullopt;
  return judge(machine, std::move(how), finished);
}

bool Liveness::lostElsewhere(int machine) {
  if (!watching(machine)) return false;
  state_[static_cast<size_t>(machine)] = State::kLost;
  return true;
}

std::optional<GroupChange> Liveness::keepAlive(int machine, int64_t count, time_point now,
                                               const std::function<bool()>& finished) {
  if (!watching(machine)) return std::nullopt;
  const auto at = static_cast<size_t>(machine);
  if (count != count_[at]) {
    count_[at] = count;
    moved_[at] = now;
    return std::nullopt;
  }
  const auto window = timeouts_.keep_alive_interval * timeouts_.keep_alive_misses;
  if (now - moved_[at] < window) return std::nullopt;
  return judge(machine, "no keep-alive for " + secondsText(window), finished);
}

// A member about to be called lost that said it finished left instead.
GroupChange Liveness::judge(int machine, std::string how, const std::function<bool()>& finished) {
  const auto at = static_cast<size_t>(machine);
  if (finished && finished()) {
    state_[at] = State::kFinished;
    return {GroupChange::Kind::kLeft, machine, ""};
  }
  state_[at] = State::kLost;
  return {GroupChange::Kind::kLost, machine, std::move(how)};
}

std::optional<GroupChange> Liveness::arrivals(int64_t registered) {
  const int machines = static_cast<int>(state_.size());
  if (joined_ || registered <= 0 || machines >= max_machines_) return std::nullopt;
  joined_ = true;
  return GroupChange{GroupChange::Kind::kJoined, -1, growthReason(machines, max_machines_)};
}

std::string Liveness::windowText() const {
  return "keep_alive_interval " + secondsText(timeouts_.keep_alive_interval) +
         " x keep_alive_max_attempt " + std::to_string(timeouts_.keep_alive_misses);
}

}  // namespace accel::launcher
