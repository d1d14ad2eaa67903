#include "probes/blas_probe.h"

#include <dirent.h>
#include <stdlib.h>

#include <memory>
#include <sstream>

#include "probes/run_program.h"

namespace accel::probes {
namespace {

// The path ldd resolved `soname` to on one of its lines ("\tlibblas.so.3 => /path (0x...)"),
// or "" when no line names it.
std::string resolvedPath(const std::string& lddOutput, const std::string& soname) {
  std::istringstream lines(lddOutput);
  std::string line;
  while (std::getline(lines, line)) {
    const auto name = line.find_first_not_of(" \t");
    if (name == std::string::npos || line.compare(name, soname.size(), soname) != 0) continue;
    const auto arrow = line.find("=> ");
    if (arrow == std::string::npos) continue;
    const auto start = arrow + 3;
    return line.substr(start, line.find(" (", start) - start);
  }
  return "";
}

std::string kindOfLibrary(const std::string& path) {
  if (path.find("openblas") != std::string::npos) return "OpenBLAS";
  if (path.find("blis") != std::string::npos) return "BLIS";
  if (path.find("atlas") != std::string::npos) return "ATLAS";
  if (path.find("mkl") != std::string::npos) return "MKL";
  if (path.find("/blas/") != std::string::npos) return "reference";
  return "";
}

// torch's extension module in its package directory: _C.cpython-*.so (not _C_flatbuffer).
std::string extensionModule(const std::string& torchDir) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(torchDir.c_str()), ::closedir);
  if (!dir) return "";
  while (dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name.rfind("_C.", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".so")
      return torchDir + "/" + name;
  }
  return "";
}

}  // namespace

std::string describeBlas(const BlasInfo& b) {
  if (b.kind.empty()) return "unknown (" + b.error + ")";
  if (b.kind == "built in") return "built into torch";
  if (b.kind == "reference") return "reference BLAS (netlib, " + b.library + "): slow";
  return b.kind + " (" + b.library + ")";
}

BlasInfo classifyBlas(const std::string& lddOutput,
                      const std::function<std::string(const std::string&)>& resolve) {
  BlasInfo info;
  if (const std::string blas = resolvedPath(lddOutput, "libblas.so.3"); !blas.empty()) {
    info.library = resolve(blas);
    info.kind = kindOfLibrary(info.library);
    if (info.kind.empty()) info.error = "libblas.so.3 is " + info.library + ", not one accel knows";
    return info;
  }
  // A wheel's own BLAS as a library of its own (aarch64 wheels: libopenblas in torch/lib).
  for (const char* own : {"libopenblas", "libmkl_rt", "libblis"}) {
    if (const std::string path = resolvedPath(lddOutput, own); !path.empty()) {
      info.library = resolve(path);
      info.kind = kindOfLibrary(info.library);
      return info;
    }
  }
  info.kind = "built in";  // x86_64 wheels link MKL in statically
  return info;
}

BlasInfo probeTorchBlas(const std::string& torchDir) {
  BlasInfo info;
  const std::string module = extensionModule(torchDir);
  if (module.empty()) {
    info.error = "no _C module in " + torchDir;
    return info;
  }
  auto run = runCaptured({"ldd", module}, std::chrono::seconds(5));
  if (!run || run->exit_code != 0) {
    info.error = "ldd " + module +
                 (run ? " exited with code " + std::to_string(run->exit_code) : ": " + run.error());
    return info;
  }
  return classifyBlas(run->output, [](const std::string& path) {
    std::unique_ptr<char, void (*)(void*)> real(::realpath(path.c_str(), nullptr), ::free);
    return real ? std::string(real.get()) : path;
  });
}

}  // namespace accel::probes
