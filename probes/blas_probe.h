#pragma once
// Which BLAS torch's matrix products run on. Debian's torch (python3-torch, libtorch) is built
// with BLAS_INFO=generic: it calls whatever libblas.so.3 the alternatives system points to — the
// reference (netlib) BLAS unless OpenBLAS or BLIS is installed, about 17x slower for fp32
// training. pip's wheels carry their own (MKL or OpenBLAS, linked in or in torch/lib).

#include <functional>
#include <string>

namespace accel::probes {

struct BlasInfo {
  // "reference" (netlib: slow), "OpenBLAS", "BLIS", "ATLAS", "MKL", "built in" (no libblas.so.3
  // among torch's libraries: its own BLAS is linked in), or "" when it could not be told.
  std::string kind;
  std::string library;  // the file torch loads for it (resolved), "" when built in
  std::string error;    // why it could not be told
  bool slow() const { return kind == "reference"; }
};

// "OpenBLAS (/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3)", "reference BLAS (netlib,
// ...): slow", "built into torch", or "unknown (why)".
std::string describeBlas(const BlasInfo& blas);

// What `ldd` printed for torch's extension module tells, a libblas.so.3 resolved by `resolve`
// (realpath: the alternatives' link to the library behind it). Pure (unit-tested).
BlasInfo classifyBlas(const std::string& lddOutput,
                      const std::function<std::string(const std::string&)>& resolve);

// Runs ldd (≤ 5 s) on torch's extension module (_C*.so) in `torchDir` (torch's package
// directory, PythonInfo::torch_dir). Never throws: an error is in BlasInfo::error.
BlasInfo probeTorchBlas(const std::string& torchDir);

// The one-line fix for a slow BLAS on Debian: the package and what it changes.
inline constexpr const char* kBlasFix =
    "sudo apt install libopenblas0-pthread (libblas.so.3 then points to OpenBLAS, which torch "
    "loads at its next start; 'update-alternatives --config libblas.so.3-x86_64-linux-gnu' "
    "chooses among installed ones)";

}  // namespace accel::probes
