#include "launcher/supervise/output_prefixer.h"

namespace accel::launcher {

std::string OutputPrefixer::feed(std::string_view data) {
  std::string out;
  for (char c : data) {
    if (c == '\n' || c == '\r') {
      out += prefix_;
      out += partial_;
      out += c;
      partial_.clear();
      continue;
    }
    partial_ += c;
    if (partial_.size() >= kMaxLine) {
      out += prefix_;
      out += partial_;
      out += '\n';
      partial_.clear();
    }
  }
  return out;
}

std::string OutputPrefixer::flush() {
  if (partial_.empty()) return "";
  std::string out = prefix_ + partial_ + "\n";
  partial_.clear();
  return out;
}

}  // namespace accel::launcher
