#include "libaccel/store/store.h"

#include "accel/error.h"

namespace accel::store {

std::vector<std::optional<std::string>> Store::present(const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    out.emplace_back();
    if (!check({key})) continue;
    try {
      out.back() = get(key, std::chrono::milliseconds(1));
    } catch (const TimeoutError&) {  // deleted since the check
    }
  }
  return out;
}

}  // namespace accel::store
