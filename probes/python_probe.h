#pragma once
// What a Python interpreter offers workers: its version and whether it can import torch.

#include <optional>
#include <string>

#include "probes/blas_probe.h"

namespace accel::probes {

struct PythonInfo {
  std::string command;               // as asked for, e.g. "python3" or "/usr/bin/python3"
  std::string executable;            // sys.executable, "" when it could not be run
  std::string version;               // "3.11.7"
  std::optional<std::string> torch;  // torch's __version__, read from torch/version.py
  std::string error;                 // why it could not be probed, "" on success
  std::optional<std::string> deepspeed = std::nullopt;  // its version (package metadata), if any
  std::string torch_dir;  // torch's package directory ("" without torch)
  // The BLAS its torch runs on: only probePythonAndBlas fills it.
  std::optional<BlasInfo> blas = std::nullopt;
};

// Runs `python` once (≤ 5 s) to read the facts above. torch is located with importlib but not
// imported (importing it costs about a second). Never throws.
PythonInfo probePython(const std::string& python);

// probePython, and for an interpreter with torch, the BLAS its torch loads (probeTorchBlas: one
// ldd more, ≤ 5 s). Never throws.
PythonInfo probePythonAndBlas(const std::string& python);

// The interpreter `accel launch` runs .py scripts with: $PYTHON_EXEC if set, else "python3".
std::string defaultPython();

// The first of python3 (PATH), /usr/bin/python3, /usr/local/bin/python3 that is another
// interpreter than `used` (by sys.executable) and has torch, probed as probePython does (its
// `command` is the candidate's name); nullopt when none has. Blocks while it runs each candidate
// once (≤ 5 s each). Never throws.
std::optional<PythonInfo> otherPythonWithTorch(const PythonInfo& used);

// The interpreter .py scripts run with when nobody chose one (no --python, config accel_python or
// $PYTHON_EXEC): `python3` (PATH), unless it has no torch and another interpreter has
// (otherPythonWithTorch) — then that one's sys.executable, and `notice` says why in one line.
// `python3` stays where it cannot be probed or no interpreter has torch (a script may not need
// it). Blocks: runs python3 once (about 50 ms; a pyenv shim's more), and the other candidates only
// where python3 has no torch (≤ 5 s each). Never throws.
struct DefaultPython {
  std::string command;
  std::string notice;  // "" when python3 is used
};
DefaultPython pythonWithTorchByDefault(const std::string& python3 = "python3");

// For a worker that died of "No module named 'torch'" under `used`: otherPythonWithTorch as the
// hint "/usr/bin/python3 has torch 1.13.0: run with --python /usr/bin/python3 (python3 is
// /root/.pyenv/shims/python3, without torch)"; nullopt when none has. Blocks and never throws,
// as otherPythonWithTorch.
std::optional<std::string> pythonWithTorchHint(const std::string& used);

}  // namespace accel::probes
