#pragma once
// A PythonInfo as a probe would report it, for the probes' tests.

#include <optional>
#include <string>

#include "probes/python_probe.h"

namespace accel::probes::testing {

inline PythonInfo pythonInfo(std::string command, std::string executable, std::string version,
                             std::optional<std::string> torch, std::string error) {
  PythonInfo p;
  p.command = std::move(command);
  p.executable = std::move(executable);
  p.version = std::move(version);
  p.torch = std::move(torch);
  p.error = std::move(error);
  return p;
}

}  // namespace accel::probes::testing
