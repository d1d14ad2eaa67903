#pragma once
// A POSIX shared-memory segment mapped by the ranks of one machine (/dev/shm/accel-shm-*).
//
// The name carries its creator's uid, pid and process start time
// ("accel-shm-<uid>-<pid>-<start>-<tag>-<random>"), so anyone of the same user can tell that a
// segment is stale (its creator is gone, or its pid now belongs to a younger process) and
// remove it: sweepStaleSegments(). The creator unlinks the name as soon as every rank has mapped
// the segment (the mappings live on), so once a group is formed, a job that ends in any way,
// SIGKILL included, leaves nothing in /dev/shm; before that point, the agent's guard (after it
// killed the workers) and the next creator sweep what a dead job left.
//
// Torch-free: the agent links it for the sweep. Not thread-safe per object.

#include <cstddef>
#include <string>
#include <vector>

#include "libaccel/common/expected.h"

namespace accel::shm {

// The prefix of every segment's name (without the leading '/').
inline constexpr const char* kSegmentPrefix = "accel-shm-";

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates a zero-filled segment of `bytes` readable and writable by this user only. `tag`
  // (made a name part by segmentTag) helps a human, or a test, tell jobs apart. Fails, naming the
  // segment and the reason, when /dev/shm has no room.
  static Expected<Segment> create(const std::string& tag, size_t bytes);
  // Maps the segment `name` (as returned by name()), which must be `bytes` long and belong to
  // this user.
  static Expected<Segment> open(const std::string& name, size_t bytes);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name; the mappings stay valid. Idempotent.
  void unlink();

 private:
  void release();
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  // this object created the name and has not removed it yet
};

// `tag` as it appears in a segment's name: letters, digits, '-' and '_' kept, other characters
// replaced by '_', at most 40 kept; "job" when empty.
std::string segmentTag(const std::string& tag);

// This process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid,
// a name no other process will ever have had. 0 when unreadable.
unsigned long long processStartTime(int pid);

// Whether the creator named in segment `name` is dead (or its pid was reused). False for names
// that are not ours to judge (another user's, not a segment name).
bool isStaleSegmentName(const char* name);

// Removes this user's segments in `dir` whose creator is dead; returns how many. Never blocks;
// errors are ignored (another sweeper may race us). Async-signal-safe, like isStaleSegmentName
// (system calls on stack buffers only): the agent's guard calls it in a fork of the
// multi-threaded agent.
int sweepStaleSegments(const char* dir = "/dev/shm");

}  // namespace accel::shm
