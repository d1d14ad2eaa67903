#include "launcher/plan/stream_masks.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "launcher/base/text.h"

namespace accel::launcher {
namespace {

// A short run of digits ("0".."999999"), else nothing: no sign, no space, no overflow.
std::optional<int> smallNumber(std::string_view s) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return std::nullopt;
  }
  return std::stoi(std::string(s));
}

std::string prefix(std::string_view flag, std::string_view text) {
  return std::string(flag) + ": '" + std::string(text) + "'";
}

}  // namespace

Expected<std::vector<int>> parseStreamMasks(std::string_view flag, std::string_view text,
                                            int localWorldSize) {
  const std::string forms =
      " (0 none, 1 stdout, 2 stderr, 3 both; or LOCAL_RANK:MASK,... as in 0:3,1:1)";
  if (auto mask = smallNumber(text)) {
    if (*mask > 3) return makeError(prefix(flag, text) + " is not a stream mask" + forms);
    return std::vector<int>(static_cast<size_t>(localWorldSize), *mask);
  }
  std::vector<int> masks(static_cast<size_t>(localWorldSize), 0);
  std::vector<bool> named(masks.size(), false);
  for (const std::string_view item : splitOn(text, ',')) {
    const size_t colon = item.find(':');
    const auto rank = colon == item.npos ? std::nullopt : smallNumber(item.substr(0, colon));
    const auto mask = colon == item.npos ? std::nullopt : smallNumber(item.substr(colon + 1));
    if (!rank || !mask)
      return makeError(prefix(flag, text) + ": '" + std::string(item) + "' is not LOCAL_RANK:MASK" +
                       forms);
    if (*mask > 3)
      return makeError(prefix(flag, text) + ": mask " + std::to_string(*mask) +
                       " is not 0, 1, 2 or 3");
    if (*rank >= localWorldSize) {
      return makeError(prefix(flag, text) + ": local rank " + std::to_string(*rank) +
                       " does not exist (0.." + std::to_string(localWorldSize - 1) + ")");
    }
    if (named[static_cast<size_t>(*rank)]) {
      return makeError(prefix(flag, text) + ": local rank " + std::to_string(*rank) +
                       " is given twice");
    }
    named[static_cast<size_t>(*rank)] = true;
    masks[static_cast<size_t>(*rank)] = *mask;
  }
  return masks;
}

}  // namespace accel::launcher
