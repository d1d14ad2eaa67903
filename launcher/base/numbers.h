#pragma once
// The one parser of the launcher's plain counts: ports, ranks, job ids, CPU numbers.

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace accel::launcher {

// `text` as a number when it is decimal digits only ("007" is 7) and at most `max`; nullopt
// for anything else: empty, a sign, a space, another character, or more than `max`.
inline std::optional<long long> parseDigits(std::string_view text, long long max) {
  if (text.empty()) return std::nullopt;
  long long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (max < digit || value > (max - digit) / 10) return std::nullopt;  // value * 10 + digit > max
    value = value * 10 + digit;
  }
  return value;
}

// `text` as a 64-bit integer: an optional '-', then decimal digits (parseDigits); nullopt for
// anything else.
inline std::optional<int64_t> parseInteger(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  const auto digits =
      parseDigits(text.substr(negative ? 1 : 0), std::numeric_limits<int64_t>::max());
  if (!digits) return std::nullopt;
  return negative ? -*digits : *digits;
}

}  // namespace accel::launcher
