#pragma once
// What the GPU probes need to reach a driver library loaded at run time (nothing CUDA is needed to
// build accel): a dlopen handle closed on scope exit, and every signal blocked while a driver
// library may start threads.

#include <dlfcn.h>
#include <signal.h>

namespace accel::probes {

// Closes a dlopen handle on scope exit.
class Library {
 public:
  explicit Library(const char* name) : handle_(::dlopen(name, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  template <typename F>
  F symbol(const char* name) const {
    return handle_ ? reinterpret_cast<F>(::dlsym(handle_, name)) : nullptr;
  }

 private:
  void* handle_;
};

// Every signal blocked in this thread while it lives, then the mask as it was. The driver
// libraries start threads of their own when loaded or initialised (libcuda.so.1 does, even with
// no GPU), and a new thread inherits its creator's mask: created with everything blocked, those
// threads never take the agent's SIGINT or SIGTERM, which the supervisor reads from a signalfd
// (a signal delivered to a thread that does not block it runs the default action: the agent
// dies on Ctrl-C instead of forwarding it).
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace accel::probes
