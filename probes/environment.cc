#include "probes/environment.h"

extern char** environ;

namespace accel::probes {

std::optional<std::string> lookup(const Environment& env, const std::string& key) {
  for (const auto& entry : env) {
    if (entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 &&
        entry[key.size()] == '=') {
      return entry.substr(key.size() + 1);
    }
  }
  return std::nullopt;
}

Environment processEnvironment() {
  Environment env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace accel::probes
