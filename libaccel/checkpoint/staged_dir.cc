#include "libaccel/checkpoint/staged_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "accel/error.h"
#include "libaccel/common/remove_tree.h"

namespace fs = std::filesystem;

namespace accel::checkpoint {
namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& path, int error) {
  throw Error(what + " '" + path.string() + "': " + std::strerror(error));
}

// Closes a descriptor on every path; close() itself is checked where it matters (writeFile).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void syncDirectory(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail("cannot open checkpoint directory", dir, errno);
  if (::fsync(fd.get()) != 0) fail("cannot sync checkpoint directory", dir, errno);
}

void renameOrFail(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw Error("cannot rename '" + from.string() + "' to '" + to.string() +
                "': " + std::strerror(errno));
  }
}

}  // namespace

void writeFile(const fs::path& path, const std::string& bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail("cannot create checkpoint file", path, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write checkpoint file", path, errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail("cannot sync checkpoint file", path, errno);
  if (::close(fd.release()) != 0) fail("cannot close checkpoint file", path, errno);
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    if (error == ENOENT) throw Error("checkpoint file '" + path.string() + "' is missing");
    fail("cannot open checkpoint file", path, error);
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad() || bytes.bad()) fail("cannot read checkpoint file", path, errno);
  return bytes.str();
}

bool isCheckpointFile(const std::string& name) {
  for (const char* known : {"model.pt", "optimizer.pt", "scaler.json", "accel_state.json"}) {
    if (name == known) return true;
  }
  const std::string prefix = "random_states_", suffix = ".pt";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string rank = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return rank.find_first_not_of("0123456789") == std::string::npos;
}

StagedDir::StagedDir(const std::string& target, uint64_t token) {
  fs::path path = fs::path(target).lexically_normal();
  if (!path.empty() && !path.has_filename()) path = path.parent_path();  // "ckpt/" → "ckpt"
  name_ = path.filename().string();
  if (name_.empty() || name_ == "." || name_ == "..") {
    throw Error("checkpoint directory '" + target +
                "' must name a directory (not '', '.' or '..')");
  }
  target_ = path;
  parent_ = path.has_parent_path() ? path.parent_path() : fs::path(".");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(token));
  token_ = hex;
  temp_ = parent_ / ("." + name_ + ".tmp-" + token_);
  claim_ = parent_ / ("." + name_ + ".tmp-" + token_ + ".claim");
}

void StagedDir::create() {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target_, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status))
      throw Error("checkpoint path '" + target_.string() + "' exists and is not a directory");
    for (const auto& entry : fs::directory_iterator(target_)) {
      const std::string entryName = entry.path().filename().string();
      if (!isCheckpointFile(entryName)) {
        throw Error("checkpoint directory '" + target_.string() + "' holds '" + entryName +
                    "', which is no checkpoint file; refusing to replace it");
      }
    }
  }
  fs::create_directories(parent_, ec);
  if (ec) throw Error("cannot create directory '" + parent_.string() + "': " + ec.message());
  // The same token on every rank: on a shared file system another rank may have created it.
  if (::mkdir(temp_.c_str(), 0755) != 0 && errno != EEXIST)
    fail("cannot create directory", temp_, errno);
}

void StagedDir::write(const std::string& name, const std::string& bytes) const {
  writeFile(temp_ / name, bytes);
}

bool StagedDir::claim() {
  int fd = ::open(claim_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) return false;  // another rank on this file system publishes
  if (fd < 0) fail("cannot create", claim_, errno);
  ::close(fd);
  claimed_ = true;
  return true;
}

void StagedDir::publish() {
  syncDirectory(temp_);
  fs::path previous;  // where the previous checkpoint is once the new one is in place
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(target_, ec))) {
    renameOrFail(temp_, target_);
  } else if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) ==
             0) {
    previous = temp_;
  } else if (errno == EINVAL || errno == ENOSYS) {
    // No atomic exchange on this file system (NFS): move the previous checkpoint aside first.
    // A crash between the two renames leaves it whole under `.NAME.old-TOKEN`.
    previous = parent_ / ("." + name_ + ".old-" + token_);
    renameOrFail(target_, previous);
    renameOrFail(temp_, target_);
  } else {
    throw Error("cannot swap '" + temp_.string() + "' with '" + target_.string() +
                "': " + std::strerror(errno));
  }
  syncDirectory(parent_);
  if (!previous.empty()) {
    ec = removeTree(previous.string());
    if (ec) {
      throw Error("the new checkpoint is in '" + target_.string() +
                  "' but the previous one could not be removed from '" + previous.string() +
                  "': " + ec.message());
    }
  }
  removeLeftovers();
}

// Temporary directories of saves that crashed, which nothing else would ever remove. Only
// entries named after this target, and never this save's own.
void StagedDir::removeLeftovers() const {
  std::error_code ec;
  const std::string tmp = "." + name_ + ".tmp-", old = "." + name_ + ".old-";
  for (const auto& entry : fs::directory_iterator(parent_, ec)) {
    const std::string n = entry.path().filename().string();
    if (n.rfind(tmp, 0) != 0 && n.rfind(old, 0) != 0) continue;
    if (n.find(token_) != std::string::npos) continue;
    removeTree(entry.path().string());
  }
}

void StagedDir::cleanUp() noexcept {
  std::error_code ec;
  ec = removeTree(temp_.string());
  if (claimed_) fs::remove(claim_, ec);
  claimed_ = false;
}

}  // namespace accel::checkpoint
