#pragma once
// The one reader of a number the agents keep in the job's store or in etcd (the round the master
// opened last, the restarts used, a counter): a value written by another program, a torn write
// or a client of another version is an error naming the key and what it holds, never
// std::invalid_argument escaping a caller that catches accel::Error.

#include <cstdint>
#include <limits>
#include <string>

#include "accel/error.h"
#include "launcher/base/numbers.h"

namespace accel::launcher {

// `value`, read from `key`, as a decimal integer (an optional '-', then digits). Throws
// accel::Error naming both otherwise.
inline int64_t storedNumber(const std::string& key, const std::string& value) {
  if (auto n = parseInteger(value)) return *n;
  throw Error("the key '" + key + "' holds '" + value.substr(0, 80) +
              "', not a number (another program writes under this job's keys?)");
}

// The same, for a count that fits an int (a round, a restart count).
inline int storedInt(const std::string& key, const std::string& value) {
  const int64_t n = storedNumber(key, value);
  if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
    throw Error("the key '" + key + "' holds " + value + ", out of range");
  }
  return static_cast<int>(n);
}

}  // namespace accel::launcher
