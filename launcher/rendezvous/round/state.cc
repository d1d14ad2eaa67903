#include "launcher/rendezvous/round/state.h"

#include "launcher/base/clock.h"

namespace accel::launcher {

std::shared_ptr<Clock> roundClock() { return std::make_shared<MonotonicClock>(); }

}  // namespace accel::launcher
