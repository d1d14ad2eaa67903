#pragma once
// removeTree: a directory tree (or a file) removed depth first without following links, by POSIX
// calls, for the agent's run directories and libaccel's checkpoints alike. Not
// std::filesystem::remove_all: pip's LibTorch (2.11) exports a broken copy of it, which the
// dynamic linker can bind ahead of libstdc++'s (a checkpoint save jumped to a null address on
// the first GPU run; pytorch/pytorch#133437).

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include <string>
#include <system_error>

namespace accel {

// Returns the first error, as remove_all's error_code would; a path that does not exist is not
// one. Thread-safe as nftw is (it changes no working directory without FTW_CHDIR).
inline std::error_code removeTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? std::error_code() : std::error_code(errno, std::generic_category());
  const auto removeOne = [](const char* p, const struct stat*, int, struct FTW*) {
    return ::remove(p) == 0 || errno == ENOENT ? 0 : errno;
  };
  const int rc = ::nftw(path.c_str(), removeOne, 16, FTW_DEPTH | FTW_PHYS);
  if (rc == 0) return {};
  return std::error_code(rc > 0 ? rc : errno, std::generic_category());
}

}  // namespace accel
