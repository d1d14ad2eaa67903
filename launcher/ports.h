#pragma once
// Ports for the job's rendezvous: a free one chosen by the agent, or a check that the one the
// user gave is free, naming who holds it when it is not.

#include <string>

#include "libaccel/common/expected.h"

namespace accel::launcher {

// A port the kernel reports free on all interfaces (bind to port 0). The socket is closed
// before returning, so another process could take it before rank 0 binds it; the agent-hosted
// store (a later issue) keeps the socket instead.
Expected<int> pickFreePort();

// Fails when a TCP socket already listens on `port` (or it cannot be bound), with a message
// naming the port and, when /proc tells, the pid and command holding it.
Expected<void> checkPortFree(int port);

}  // namespace accel::launcher
