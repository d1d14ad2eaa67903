#pragma once
// Small text helpers the launcher's parsers and messages share.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace accel::launcher {

inline std::string upperCase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

inline std::string lowerCase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The items of `text` between `sep`s, empty ones included: "a,,b" → a, "", b; "" → one empty item.
// The views point into `text`.
inline std::vector<std::string_view> splitOn(std::string_view text, char sep) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    items.push_back(
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return items;
    start = end + 1;
  }
}

// `text` without the whitespace at both ends, as Python's str.strip().
inline std::string_view trimmed(std::string_view text) {
  const char* space = " \t\n\r\v\f";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// Ascending values as runs: formatRuns({0, 1, 2, 4}, ",", "-") → "0-2,4". A run of two is a
// range only if `pairsAsRanges` ("0-1"), else two items ("0,1").
inline std::string formatRuns(const std::vector<int>& sorted, const std::string& sep,
                              const std::string& dash, bool pairsAsRanges) {
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += sep;
    out += std::to_string(sorted[i]);
    if (j > i) out += (j == i + 1 && !pairsAsRanges ? sep : dash) + std::to_string(sorted[j]);
    i = j + 1;
  }
  return out;
}

// "rank 3", "ranks 0, 2", "ranks 0–3": ranks for messages, the noun agreeing with their count.
inline std::string ranksText(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + formatRuns(ranks, ", ", "\u2013", false);
}

// "1.5 s", "900 s": a duration for messages.
inline std::string secondsText(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace accel::launcher
