#pragma once
// Crash-safe checkpoint directories. Every rank writes its files into a temporary directory
// next to the target, `.NAME.tmp-TOKEN` (TOKEN agreed by all ranks, so ranks that share a file
// system share it, and ranks that do not each have their own); once every rank has written,
// exactly one rank per file system publishes it: an atomic swap with the previous checkpoint
// (or a rename when there is none), then the previous one is removed. A crash at any point
// leaves the previous checkpoint whole under the target's name.
//
// Nothing here is a collective: the caller (Accelerator::saveState) orders the phases with
// its communicator. Not thread-safe. Every failure is an accel::Error naming the file or
// directory and the system's reason.

#include <cstdint>
#include <filesystem>
#include <string>

namespace accel::checkpoint {

// Writes `bytes` into the new file `path` (an error if it exists) and fsyncs it. Every call is
// checked: open, each write (EFBIG, ENOSPC, EIO...), fsync, close.
void writeFile(const std::filesystem::path& path, const std::string& bytes);

// The whole content of `path`; an error naming it when it is missing or unreadable.
std::string readFile(const std::filesystem::path& path);

// Whether `name` is one of the files a checkpoint holds (model.pt, optimizer.pt, scaler.json,
// accel_state.json, random_states_<rank>.pt).
bool isCheckpointFile(const std::string& name);

class StagedDir {
 public:
  // `target` names the checkpoint directory (relative or absolute; not "", "." or ".."). Throws
  // accel::Error for such a name. Touches nothing.
  StagedDir(const std::string& target, uint64_t token);

  // Creates the target's parent directories and the temporary directory (each rank creates
  // what it writes: no rank relies on another having done it). Throws accel::Error when the
  // target exists and is not a directory holding only checkpoint files (which publish()
  // would delete).
  void create();

  // Writes one file of this rank's part into the temporary directory (see writeFile).
  void write(const std::string& name, const std::string& bytes) const;

  // After every rank wrote: true for exactly one caller per file system (an O_EXCL claim
  // file beside the temporary directory), which must then call publish().
  bool claim();

  // Swaps the temporary directory into place (RENAME_EXCHANGE; on file systems without it,
  // two renames), removes the previous checkpoint and leftovers of interrupted saves, and
  // fsyncs the parent.
  void publish();

  // After every rank is done with claim()/publish() (or after a failure): removes this
  // rank's claim file and the temporary directory if it is still there. Never throws.
  void cleanUp() noexcept;

  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temp() const { return temp_; }

 private:
  void removeLeftovers() const;

  std::filesystem::path target_;
  std::filesystem::path parent_;
  std::string name_;
  std::string token_;
  std::filesystem::path temp_;
  std::filesystem::path claim_;
  bool claimed_ = false;
};

}  // namespace accel::checkpoint
