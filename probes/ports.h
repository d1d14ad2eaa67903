#pragma once
// Who holds a TCP port of this machine: a check that the port the user gave for the job's store is
// free, naming who holds it when it is not (with no port given, the store binds port 0 and keeps
// the socket: no check needed), and the rule of agents of one machine that may host the same
// port.

#include <functional>
#include <string>

#include "libaccel/common/expected.h"

namespace accel::probes {

// Fails when a TCP socket already listens on `port` (or it cannot be bound), with a message
// naming the port, where it came from (`origin`: the flag as the user spelled it, or the config
// key and file) and, when /proc tells, the pid and command holding it.
Expected<void> checkPortFree(int port, const std::string& origin = "--main_process_port");

// Whether a TCP socket of this network namespace listens on `port` (/proc/net/tcp and tcp6).
// Reads two small files; thread-safe; never throws.
bool portHasListener(int port);

// An agent that may host a c10d rendezvous on a port other agents of its machine may also try:
// Hosted once `listen` (which throws accel::AddressInUseError when the port is taken) succeeds;
// Join as soon as the port is taken and `hasListener` says someone listens there. Taken with nobody
// listening is the race of two agents that bound the port together (SO_REUSEADDR lets both bind)
// and then both failed to listen: `pause` (a short random wait) and try again, at most `attempts`
// times in all, then Join (the wait for the host then says what is wrong). Other errors of
// `listen` propagate. Blocks only in the callables.
enum class HostOutcome { Hosted, Join };
HostOutcome hostOrJoin(const std::function<void()>& listen,
                       const std::function<bool()>& hasListener, const std::function<void()>& pause,
                       int attempts);

}  // namespace accel::probes
