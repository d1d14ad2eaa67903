#pragma once
// A backtrace on SIGABRT, for the agent's hang report (issue: "see inside a running job").
// When the agent finds a job hung it sends SIGABRT to every rank: python3-torch workers answer
// with faulthandler's dump of every thread (the agent sets PYTHONFAULTHANDLER=1), and a C++
// worker that installed this handler writes the stack of the thread that took the signal (the
// main thread: Linux delivers a signal sent to a process to its main thread unless it blocks
// it) to stderr, then dies of SIGABRT as it would have without the handler.
//
// The text, one frame per line, as glibc's backtrace_symbols_fd writes it:
//   accel: stack of pid 4242 (thread 4242) on SIGABRT:
//   ./worker(_Z20stuckBeforeAllReducei+0x2c)[0x55d0c6e1a2ac]
// Names are mangled (demangling allocates, which a signal handler must not do; the agent
// demangles them when it reports). Functions of an executable appear by name only if it was
// linked with -rdynamic (CMake: ENABLE_EXPORTS); shared libraries' always do.

namespace accel {

// Installs the handler for SIGABRT unless the process already has one of its own (then it is
// left alone and false returned). Idempotent; thread-safe; async-signal-safe once installed
// (backtrace's library is loaded here, not in the handler).
bool installStackDumpOnAbort();

}  // namespace accel
