#include "launcher/report/stack_frames.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <sstream>

namespace accel::launcher {
namespace {

// A backtrace_symbols line: "OBJECT(SYMBOL+OFFSET) [ADDRESS]" (SYMBOL may be empty).
bool nativeFrame(const std::string& line) {
  return line.find(") [0x") != std::string::npos || line.find(")[0x") != std::string::npos;
}

// Frames of the C library, the loader, the vDSO: where a blocked rank waits, not why.
bool systemFrame(const std::string& line) {
  const std::string object = line.substr(0, line.find('('));
  const std::string base =
      object.substr(object.rfind('/') == std::string::npos ? 0 : object.rfind('/') + 1);
  for (const char* prefix :
       {"libc.so", "libc-", "libpthread", "ld-linux", "linux-vdso", "libgcc_s"})
    if (base.rfind(prefix, 0) == 0) return true;
  return false;
}

// "mytrain(+0x8988a) [0x55d0c2a4988a]" → "mytrain(+0x8988a)": the absolute address differs from
// process to process (ASLR), the object and offset do not — ranks at one place compare equal.
std::string withoutAddress(const std::string& line) {
  size_t at = line.rfind("[0x");
  if (at == std::string::npos) return line;
  while (at > 0 && line[at - 1] == ' ') --at;
  return line.substr(0, at);
}

}  // namespace

std::string demangleStack(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("(_Z", pos);
    if (open == std::string::npos) break;
    const size_t end = text.find_first_of("+)", open);
    if (end == std::string::npos) break;
    out.append(text, pos, open + 1 - pos);
    const std::string mangled = text.substr(open + 1, end - open - 1);
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(
        abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
    out += status == 0 && name ? name.get() : mangled;
    pos = end;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

bool frameWithoutSymbol(const std::string& line) {
  return line.find("(+0x") != std::string::npos && line.find("File \"") == std::string::npos;
}

std::string mainThreadPart(const std::string& stack) {
  const size_t at = stack.find("Current thread");
  if (at == std::string::npos) return stack;
  const size_t next = stack.find("\nThread 0x", at);
  return stack.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

std::string frameOfInterest(const std::string& stack) {
  std::istringstream lines(mainThreadPart(stack));
  const bool python = stack.find("Current thread") != std::string::npos ||
                      stack.find("File \"") != std::string::npos;
  std::string first;
  for (std::string line; std::getline(lines, line);) {
    if (python) {
      if (line.find("File \"") != std::string::npos) return line;
      continue;
    }
    if (!nativeFrame(line)) continue;  // the dump's heading
    if (first.empty()) first = line;
    if (!systemFrame(line)) return withoutAddress(demangleStack(line));
  }
  return withoutAddress(demangleStack(first));  // every frame the system's: the innermost
}

}  // namespace accel::launcher
