#pragma once
// Network facts an agent of a multi-machine job needs before it spawns anything: which local
// interface reaches the master, and whether the master's store answers there. Errors name the
// host, the port and the local interface, so "cannot reach" says where to look.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "libaccel/common/expected.h"

namespace accel::probes {

struct Route {
  std::string address;    // the master's address as resolved here (first usable result)
  std::string local_ip;   // the source address the kernel picks for it
  std::string interface;  // the interface that holds local_ip ("lo", "eth0", ...)
};

// Resolves `host` and asks the kernel which local address and interface reach it (no packet
// is sent). Errors: the name does not resolve, or there is no route to it. Blocks only on name
// resolution (bounded by the resolver's own timeouts); never throws.
Expected<Route> routeTo(const std::string& host);

// Whether `host` names this machine: it resolves to a loopback address or to an address a local
// interface holds (torch's c10d rendezvous asks the same to decide which agent hosts the store,
// by host name; addresses also tell apart hosts that share a name, as network namespaces do). A
// name that does not resolve is not this machine. Blocks only on name resolution; never throws.
bool isThisMachine(const std::string& host);

// Whether `route` leaves through loopback (its source address is 127.0.0.0/8 or ::1): the host
// it reaches is this machine, and its local_ip is no address another machine can reach.
bool isLoopback(const Route& route);

// The address this machine's peers most likely reach it by when the route at hand is loopback
// (its etcd runs here and was named "localhost"): the first IPv4 address of an interface that is
// up and not loopback, else the first such IPv6 address that is not link-local; `address` is
// left empty and `local_ip`/`interface` are set. An error when no such interface exists. Never
// blocks; never throws.
Expected<Route> outwardRoute();

// "vethB (10.200.0.2)", or "no interface" when unknown.
std::string describeInterface(const Route& route);

// Keeps trying a TCP connection to host:port until one succeeds or `timeout` passes (the master
// may start later than this agent), reporting every `progressEvery` through `progress`, and
// returns the route it reached it by. The error names the host, the port, the local interface
// and the last reason ("connection refused", "no route to host"). A name that does not resolve
// or an address with no route is an error after one try, whatever `timeout`, with no progress
// report. Blocks the calling thread, which also runs `progress` (whose exceptions propagate);
// name resolution can add the resolver's own timeouts to `timeout`.
Expected<Route> waitForListener(const std::string& host, int port,
                                std::chrono::milliseconds timeout,
                                std::chrono::milliseconds progressEvery,
                                const std::function<void(const std::string&)>& progress,
                                const std::string& addressFlag = "--main_process_ip");

// The address SLURM's controller has for node `name` (NodeAddr in `scontrol show node`), for
// clusters whose node names do not resolve; nullopt when scontrol cannot say. Runs scontrol and
// blocks for at most 10 s; never throws.
std::optional<std::string> slurmNodeAddress(const std::string& name);

}  // namespace accel::probes
