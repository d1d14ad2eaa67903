#pragma once
// Reader for the IDX format of (Fashion-)MNIST, plain or gzip-compressed.

#include <string>

#include <ATen/ATen.h>

namespace accel {

// Reads an IDX file (".gz" is decompressed) into a uint8 tensor of the shape its header gives,
// e.g. [60000, 28, 28] for images or [60000] for labels. Throws accel::Error naming the file
// for a missing file, a bad magic number or a short read.
at::Tensor readIdx(const std::string& path);

}  // namespace accel
