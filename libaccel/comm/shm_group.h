#pragma once
// Group: the collectives of the ranks of one machine through one shared-memory segment.
// Torch-free: it works on raw memory (shm_communicator.h puts tensors and a thread on top).
//
// Segment layout: a header (magic, geometry, a nonce, and one cache line per rank holding its
// progress counter, sleeper count and pid), then two sets of staging slots, one per rank, and
// two result areas; messages larger than a slot go through in pieces, alternating between the
// two sets. Every operation is a sequence of sync points; at each, a rank publishes that it
// arrived (its counter) and waits until every rank did: a short bounded spin, then a futex wait
// on the peer's counter (no sleeping polls; the spin is skipped when the ranks outnumber the
// CPUs). All-reduce: for small pieces each rank copies its piece into its slot and every rank
// then combines all slots into its own buffer (one sync point); for large ones each rank
// publishes the others' cache-line-aligned slices of its piece, reduces its own slice in place
// (its own part read from its buffer) and into the result area, and copies the others' slices
// of the result out (reduce-scatter then all-gather: two sync points). Only bytes another rank
// reads cross the segment, written with the stores that are faster here (Stores). Single-sync-point
// operations alternate between the two sets, so that a sync point's wait is also the guarantee that
// a slot is no longer read before it is overwritten; the split all-reduce stays on one set (its
// second sync point gives that guarantee).
//
// Never hangs: a wait is bounded by the options' timeout per operation, and a waiting rank
// checks every 100 ms whether the rank it waits for is still alive (a pidfd of it): a dead peer
// fails the operation at once, naming it. The first rank that fails marks the group failed,
// naming the rank it gave up on, and wakes the others, which then fail too, naming it as well; a
// failed group refuses further operations.
//
// Thread-safety: one thread per Group object at a time. Every rank must run the same
// operations in the same order with the same sizes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "libaccel/comm/shm_reduce.h"
#include "libaccel/comm/shm_segment.h"

namespace accel::shm {

namespace detail {
struct SegmentHeader;
struct RankSlot;
}  // namespace detail

// How a rank writes the bytes another rank reads next (the split all-reduce's published slices
// and result). Streaming (non-temporal) stores skip taking back lines another core holds, but
// send the bytes to memory; plain stores keep them in the cache the other core reads through.
// Which is faster depends on the machine (publishing 1 MiB to the other core: 145 us plain, 39 us
// streamed on one 2-core VM; on another the split all-reduce of 1 MiB took 220 us plain, 295 us
// streamed), so Auto measures both when the group forms.
enum class Stores : uint8_t { Auto, Plain, Streaming };

struct GroupOptions {
  // Bytes per staging slot; 0: chosen from the number of ranks (4 MiB for up to 7 ranks, less
  // beyond, so the segment stays under ~64 MiB).
  size_t slot_bytes = 0;
  // All-reduce pieces up to this many bytes are combined by every rank (one sync point); larger
  // ones are split between the ranks (two).
  size_t small_bytes = 32u << 10;
  // How long a rank spins before it sleeps on a futex; 0 disables the spin.
  std::chrono::microseconds spin{20};
  // Auto: attach() times the split all-reduce both ways (3 rounds each, a few ms) and rank 0's
  // choice holds for every rank.
  Stores stores = Stores::Auto;
  // Bound on each operation (and on the wait for the others to attach).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// The bytes a segment for `size` ranks needs with these options (the slot size resolved).
size_t segmentBytes(int size, const GroupOptions& options);

class Group {
 public:
  // The creator (exactly one rank) initialises `segment`, which it created with
  // segmentBytes(size, options) bytes; returns the nonce the others must present.
  static uint64_t initialise(Segment& segment, int size, const GroupOptions& options);
  // Joins the group through an initialised segment; throws accel::Error when its header does
  // not match (another job's segment, other options, another nonce). Does not block: attach().
  Group(Segment segment, int rank, int size, uint64_t nonce, const GroupOptions& options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // Blocks until every rank attached (at most options.timeout), then removes the segment's
  // name (creator only) and, with Stores::Auto, chooses the stores (collectively). Throws
  // accel::TimeoutError naming the ranks that never came.
  void attach();

  int rank() const { return rank_; }
  // Whether the split all-reduce writes what others read with streaming stores (after attach).
  bool streaming() const { return streaming_; }
  int size() const { return size_; }

  // Blocking collectives; each throws accel::TimeoutError past the timeout, accel::Error when a
  // peer died or another rank failed the group.
  void allreduce(void* data, size_t count, DType dtype, Op op);
  // An in-place sum of float32 `data` with bfloat16 on the wire (sumBf16Wire, shm_reduce.h): what
  // crosses the segment is half the bytes of a float32 all-reduce, converted on the way in and
  // out rather than in passes of their own. `scale` (1 / size() for an average; 1: a sum)
  // multiplies each rank's part before it is rounded.
  void allreduceBf16Wire(float* data, size_t count, float scale = 1.0f);
  // An in-place average of float32 `data`: each rank's part times `scale` (1 / size()), summed
  // (scaleCopy, sumOwnScaled: the bits of scaling in a pass of its own, then all-reducing), the
  // scaling done on the way into the segment and the sum.
  void allreduceMean(float* data, size_t count, float scale);
  void broadcast(void* data, size_t bytes, int root);
  void allgather(const void* in, size_t bytes, void* out);  // out: size() × bytes, rank order
  void barrier();

 private:
  using Header = detail::SegmentHeader;
  using RankSlot = detail::RankSlot;
  using Clock = std::chrono::steady_clock;

  Header& header() const;
  RankSlot& slot(int rank) const;
  char* staging(int set, int rank) const;
  char* result(int set) const;

  void sync(const char* what, Clock::time_point deadline);
  void waitFor(int peer, uint32_t target, const char* what, Clock::time_point deadline);
  bool sleepOn(int peer, uint32_t seen, Clock::time_point deadline);
  void checkPeer(int peer, const char* what);
  [[noreturn]] void fail(const std::string& message, bool timeout, int culprit);
  void checkHealthy() const;
  Clock::time_point deadline() const { return Clock::now() + options_.timeout; }

  void chooseStores();
  void publish(char* to, const char* from, size_t bytes) const;
  void reduceSmall(char* data, size_t count, DType dtype, Op op, Clock::time_point deadline);
  void reduceSplit(char* data, size_t count, DType dtype, Op op, Clock::time_point deadline);
  void wireSmall(float* data, size_t count, float scale, Clock::time_point deadline);
  void wireSplit(float* data, size_t count, float scale, Clock::time_point deadline);
  void meanSmall(float* data, size_t count, float scale, Clock::time_point deadline);
  void meanSplit(float* data, size_t count, float scale, Clock::time_point deadline);
  // The split all-reduce's slice of rank `r` among `count` elements of `elem` bytes: its first
  // element and its length.
  std::pair<size_t, size_t> sliceOf(int r, size_t count, size_t elem) const;

  Segment segment_;
  int rank_;
  int size_;
  GroupOptions options_;
  size_t slot_bytes_;
  uint32_t phase_ = 0;                  // sync points passed; the same on every rank
  int set_ = 0;                         // staging set of the next piece
  bool streaming_ = true;               // see Stores
  std::vector<int> pidfds_;             // per peer, opened when first waited for; -1 unknown
  std::vector<const void*> inputs_;     // scratch: the slots a reduction reads
  std::vector<const uint16_t*> wires_;  // scratch: the bf16 slots allreduceBf16Wire reads
  std::vector<const float*> parts_;     // scratch: the float32 slots allreduceMean reads
};

}  // namespace accel::shm
