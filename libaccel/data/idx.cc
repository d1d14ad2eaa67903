#include "accel/idx.h"

#include <zlib.h>

#include <cstring>
#include <vector>

#include "accel/error.h"

namespace accel {
namespace {

// gzread reads plain files too, so one path serves both.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : file_(::gzopen(path.c_str(), "rb")), path_(path) {
    if (!file_) throw Error("cannot open IDX file '" + path + "': " + std::strerror(errno));
  }
  ~GzFile() { ::gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  void read(void* buf, size_t size, const char* what) {
    char* p = static_cast<char*>(buf);
    while (size > 0) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(size, 1u << 30));
      int n = ::gzread(file_, p, chunk);
      if (n <= 0) throw Error("IDX file '" + path_ + "' ends early (reading its " + what + ")");
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

 private:
  gzFile file_;
  std::string path_;
};

uint32_t bigEndian(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

}  // namespace

at::Tensor readIdx(const std::string& path) {
  GzFile file(path);
  unsigned char magic[4];
  file.read(magic, 4, "magic number");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4) {
    throw Error("'" + path + "' is not an IDX file of unsigned bytes (magic " +
                std::to_string(bigEndian(magic)) + ")");
  }
  std::vector<int64_t> shape;
  int64_t total = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char dim[4];
    file.read(dim, 4, "dimensions");
    shape.push_back(static_cast<int64_t>(bigEndian(dim)));
    total *= shape.back();
  }
  at::Tensor out = at::empty(shape, at::kByte);
  file.read(out.data_ptr<uint8_t>(), static_cast<size_t>(total), "data");
  return out;
}

}  // namespace accel
