#pragma once
// Reading the launcher's environment in workers (libaccel): a variable's value, typed.

#include <cstdlib>
#include <optional>
#include <string>

#include "accel/error.h"

namespace accel::env {

// The variable's value; nullopt when unset or empty.
inline std::optional<std::string> getString(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

// The variable as an integer, `fallback` when unset or empty. Throws accel::Error naming the
// variable when it is not an integer.
inline int getInt(const char* name, int fallback) {
  auto v = getString(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v->c_str(), &end, 10);
  ACCEL_CHECK(*end == '\0', "environment variable ", name, "='", *v, "' is not an integer");
  return static_cast<int>(n);
}

}  // namespace accel::env
