#pragma once
// OutputPrefixer: turns a worker's byte stream into whole lines, each prefixed with its rank,
// so lines from different ranks never interleave mid-line on the console.

#include <string>
#include <string_view>

namespace accel::launcher {

class OutputPrefixer {
 public:
  // Longest line kept whole; longer runs are cut and emitted in pieces.
  static constexpr size_t kMaxLine = 64 * 1024;

  explicit OutputPrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends `data` and returns the complete lines it finished, each prefixed and ending in '\n'.
  // A '\r' (progress bar redraw) also ends a piece: it is emitted at once, prefixed, ending in
  // '\r', so a redrawn bar keeps its prefix on a terminal.
  std::string feed(std::string_view data);

  // The unterminated rest (prefixed, with '\n' added), or "" if there is none. For EOF.
  std::string flush();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace accel::launcher
