#include "libaccel/common/stack_dump.h"

#include <execinfo.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <mutex>

namespace accel {
namespace {

constexpr int kMaxFrames = 128;

// Decimal digits of `value` into `out` (async-signal-safe); returns the length.
size_t formatUnsigned(unsigned long value, char* out) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

void writeText(const char* text, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<size_t>(n);
  }
}

void append(char* line, size_t& used, const char* text) {
  const size_t n = std::strlen(text);
  std::memcpy(line + used, text, n);
  used += n;
}

// The instruction the signal interrupted (nullptr where this file does not know the machine).
void* interruptedAt(const void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<void*>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return nullptr;
#endif
}

void onAbort(int sig, siginfo_t*, void* context) {
  char line[128];
  size_t used = 0;
  append(line, used, "accel: stack of pid ");
  used += formatUnsigned(static_cast<unsigned long>(::getpid()), line + used);
  append(line, used, " (thread ");
  used += formatUnsigned(static_cast<unsigned long>(::syscall(SYS_gettid)), line + used);
  append(line, used, ") on SIGABRT:\n");
  writeText(line, used);
  void* frames[kMaxFrames];
  const int count = ::backtrace(frames, kMaxFrames);
  // From the interrupted instruction on: this handler's own frames and the signal's trampoline
  // are not where the rank was (the agent's summary names the first frame of the dump it can).
  const void* pc = interruptedAt(context);
  int first = 0;
  for (int i = 0; pc && i < count; ++i) {
    if (frames[i] == pc) {
      first = i;
      break;
    }
  }
  ::backtrace_symbols_fd(frames + first, count - first, STDERR_FILENO);
  // Die of the signal, as without the handler (abort() would raise it again the same way).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

bool installStackDumpOnAbort() {
  static std::once_flag once;
  static bool installed = false;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGABRT, nullptr, &current) != 0) return;
    if (current.sa_handler != SIG_DFL) return;  // the program's own handler stays
    void* frame[1];
    ::backtrace(frame, 1);  // loads libgcc_s now: the handler must not (it allocates)
    struct sigaction action {};
    action.sa_sigaction = onAbort;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    installed = ::sigaction(SIGABRT, &action, nullptr) == 0;
  });
  return installed;
}

}  // namespace accel
