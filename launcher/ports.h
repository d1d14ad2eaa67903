#pragma once
// A check that the port the user gave for the job's store is free, naming who holds it when
// it is not. (With no port given, the store binds port 0 and keeps the socket: no check needed.)

#include <string>

#include "libaccel/common/expected.h"

namespace accel::launcher {

// Fails when a TCP socket already listens on `port` (or it cannot be bound), with a message
// naming the port and, when /proc tells, the pid and command holding it.
Expected<void> checkPortFree(int port);

}  // namespace accel::launcher
