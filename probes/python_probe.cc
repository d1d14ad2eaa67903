#include "probes/python_probe.h"

#include <cstdlib>
#include <sstream>

#include "probes/run_program.h"

namespace accel::probes {
namespace {

constexpr const char* kProbe = R"PY(
import importlib.util, os, re, sys
version = ""
torch_dir = ""
try:
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        torch_dir = os.path.dirname(spec.origin)
        with open(os.path.join(torch_dir, "version.py")) as f:
            m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", f.read())
            version = m.group(1) if m else "unknown"
except Exception:
    version = "unknown"
ds = ""
try:
    if importlib.util.find_spec("deepspeed") is not None:
        import importlib.metadata
        ds = importlib.metadata.version("deepspeed")
except Exception:
    ds = "unknown"
print(sys.executable)
print(sys.version.split()[0])
print(version)
print(ds)
print(torch_dir)
)PY";

}  // namespace

std::string defaultPython() {
  const char* exec = std::getenv("PYTHON_EXEC");
  return exec && *exec ? exec : "python3";
}

PythonInfo probePython(const std::string& python) {
  PythonInfo info;
  info.command = python;
  if (findInPath(python).empty()) {
    info.error = "'" + python + "' not found in PATH";
    return info;
  }
  auto run = runCaptured({python, "-c", kProbe}, std::chrono::seconds(5));
  if (!run) {
    info.error = run.error();
    return info;
  }
  if (run->exit_code != 0) {
    info.error = "'" + python + "' exited with code " + std::to_string(run->exit_code);
    return info;
  }
  std::istringstream lines(run->output);
  std::string torch;
  std::getline(lines, info.executable);
  std::getline(lines, info.version);
  std::getline(lines, torch);
  if (!torch.empty()) info.torch = torch;
  std::string deepspeed;
  std::getline(lines, deepspeed);
  if (!deepspeed.empty()) info.deepspeed = deepspeed;
  if (info.torch) std::getline(lines, info.torch_dir);
  return info;
}

PythonInfo probePythonAndBlas(const std::string& python) {
  PythonInfo info = probePython(python);
  if (info.torch && !info.torch_dir.empty()) info.blas = probeTorchBlas(info.torch_dir);
  return info;
}

std::optional<PythonInfo> otherPythonWithTorch(const PythonInfo& used) {
  for (const char* candidate : {"python3", "/usr/bin/python3", "/usr/local/bin/python3"}) {
    PythonInfo other = probePython(candidate);
    if (!other.error.empty() || !other.torch) continue;
    if (!used.executable.empty() && other.executable == used.executable) continue;
    return other;
  }
  return std::nullopt;
}

DefaultPython pythonWithTorchByDefault(const std::string& python3) {
  const PythonInfo used = probePython(python3);
  if (!used.error.empty() || used.torch) return {python3, ""};
  const auto other = otherPythonWithTorch(used);
  if (!other || other->executable.empty()) return {python3, ""};
  return {other->executable, python3 + " (" + used.executable +
                                 ") has no torch: .py scripts run with " + other->executable +
                                 ", which has torch " + *other->torch +
                                 " (--python, or accel_python in the config file, chooses)"};
}

std::optional<std::string> pythonWithTorchHint(const std::string& used) {
  const PythonInfo workers = probePython(used);
  const auto other = otherPythonWithTorch(workers);
  if (!other) return std::nullopt;
  return other->command + " has torch " + *other->torch + ": run with --python " + other->command +
         " (" + used + (workers.executable.empty() ? "" : " is " + workers.executable + ",") +
         " without torch)";
}

}  // namespace accel::probes
