#pragma once
// What a Python interpreter offers workers: its version and whether it can import torch.

#include <optional>
#include <string>

namespace accel::probes {

struct PythonInfo {
  std::string command;               // as asked for, e.g. "python3" or "/usr/bin/python3"
  std::string executable;            // sys.executable, "" when it could not be run
  std::string version;               // "3.11.7"
  std::optional<std::string> torch;  // torch's __version__, read from torch/version.py
  std::string error;                 // why it could not be probed, "" on success
};

// Runs `python` once (≤ 5 s) to read the facts above. torch is located with importlib but not
// imported (importing it costs about a second). Never throws.
PythonInfo probePython(const std::string& python);

// The interpreter `accel launch` runs .py scripts with: $PYTHON_EXEC if set, else "python3".
std::string defaultPython();

}  // namespace accel::probes
