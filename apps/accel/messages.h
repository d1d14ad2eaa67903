#pragma once
// The CLI's own lines on stderr: "accel: error: ..." and "accel: info: ...", the level in colour
// when stderr is a terminal. (Not spdlog: loading it and fmt cost every `accel launch` about a
// quarter of a millisecond for these few lines; scripts/bench/launch.sh.)

#include <string>

namespace accel::apps {

void printError(const std::string& message);
void printInfo(const std::string& message);

}  // namespace accel::apps
