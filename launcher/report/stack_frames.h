#pragma once
// The frames of a rank's stack as the agent collected them (after SIGABRT): Python's
// faulthandler dump, or libaccel's native one (backtrace_symbols lines, libaccel/common/
// stack_dump.cc). Pure text functions, for the hang rule and the failure summary alike.

#include <string>

namespace accel::launcher {

// Of a faulthandler dump, the main thread's part (from "Current thread" to the next thread or
// the end); any other stack whole.
std::string mainThreadPart(const std::string& stack);

// The frame worth naming: Python's innermost `File "..."` line of the main thread; in a native
// dump, the first frame outside the C library, the dynamic loader and the signal's trampoline,
// its symbol demangled. "" when the stack has none.
std::string frameOfInterest(const std::string& stack);

// backtrace_symbols text with each C++ symbol demangled:
// "mytrain(_ZN5accel11Accelerator8backwardERKN2at6TensorE+0x2a) [0x55d0]" →
// "mytrain(accel::Accelerator::backward(at::Tensor const&)+0x2a) [0x55d0]"; the rest as it is.
std::string demangleStack(const std::string& text);

// A native frame that names no symbol ("mytrain(+0x8988a) [0x...]"): the program was linked
// without its symbols in the dynamic table.
bool frameWithoutSymbol(const std::string& line);

// How to get names where frames have none.
inline constexpr const char* kSymbolNamesHint =
    "frames show no names: link the program with -rdynamic (CMake: set_target_properties(T "
    "PROPERTIES ENABLE_EXPORTS ON))";

}  // namespace accel::launcher
