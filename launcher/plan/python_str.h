#pragma once
// Python's str() of a parsed flag or config value, as accelerate writes it into the
// environment with str(value): True/False, 1.0, 1e-05, ['a', 'b'], None.

#include <string>

#include <nlohmann/json.hpp>

namespace accel::launcher {

std::string pythonStr(const nlohmann::json& value);

}  // namespace accel::launcher
