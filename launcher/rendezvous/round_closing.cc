#include "launcher/rendezvous/round_closing.h"

#include <algorithm>

namespace accel::launcher {

RoundClosing::RoundClosing(int minMachines, int maxMachines, int expectMachines,
                           std::chrono::milliseconds lastCall)
    : least_(minMachines > 0 ? std::min(minMachines, maxMachines) : maxMachines),
      most_(maxMachines),
      expect_(expectMachines),
      last_call_(lastCall) {}

bool RoundClosing::ready(int count, time_point now) {
  if (count >= most_) return true;
  if (count < least_) {
    last_call_end_.reset();  // below MIN again: a later MIN starts a new last call
    return false;
  }
  if (expect_ > 0 && count >= expect_) return true;
  if (!last_call_end_) last_call_end_ = now + last_call_;
  return now >= *last_call_end_;
}

}  // namespace accel::launcher
