#include "apps/accel/messages.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace accel::apps {
namespace {

// Colour only for a terminal that has it (TERM set and not "dumb").
bool colourful() {
  const char* term = std::getenv("TERM");
  return ::isatty(2) == 1 && term != nullptr && *term != '\0' && std::strcmp(term, "dumb") != 0;
}

void print(const char* level, const char* colour, const std::string& message) {
  std::string line = "accel: ";
  line += colourful() ? std::string(colour) + level + "\033[m" : std::string(level);
  line += ": " + message + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void printError(const std::string& message) { print("error", "\033[31m\033[1m", message); }
void printInfo(const std::string& message) { print("info", "\033[32m", message); }

}  // namespace accel::apps
