#include "libaccel/comm/shm_group.h"

#include <linux/futex.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <thread>

#include "accel/error.h"

namespace accel::shm {

namespace {

constexpr uint64_t kMagic = 0x6d68732d6c656361ull;  // "accel-shm"
constexpr uint32_t kVersion = 2;
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr auto kLivenessSlice = std::chrono::milliseconds(100);
constexpr size_t kProbeBytes = 1u << 20;  // the all-reduce Stores::Auto times

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t resolveSlotBytes(int size, const GroupOptions& options) {
  if (options.slot_bytes) return roundUp(options.slot_bytes, kLine);
  // Two sets of `size` slots plus two result areas, in about 64 MiB at most.
  const size_t budget = (64u << 20) / (2 * static_cast<size_t>(size) + 2);
  return std::clamp(budget / kPage * kPage, size_t{256} << 10, size_t{4} << 20);
}

// Whether counter `value` reached `target` (counters wrap around).
bool reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::string peerName(int rank, int pid) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
}

}  // namespace

namespace detail {
// One cache line per rank: written by its rank (seq, pid) or by its waiters (waiters).
struct alignas(kLine) RankSlot {
  std::atomic<uint32_t> seq;      // sync points this rank arrived at
  std::atomic<uint32_t> waiters;  // ranks asleep on seq
  std::atomic<int32_t> pid;       // 0 until attached
  uint64_t start_time;
};

struct alignas(kLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  int32_t size;
  uint64_t slot_bytes;
  uint64_t nonce;
  std::atomic<int32_t> failed;     // 0, or 1 + the first rank that failed the group
  int32_t culprit;                 // the rank it gave up on (written before `failed`)
  int32_t culprit_died;            // 1: it died; 0: it timed out
  std::atomic<int32_t> streaming;  // Stores::Auto's choice, rank 0's: 1 streaming, 0 plain
};
}  // namespace detail

size_t segmentBytes(int size, const GroupOptions& options) {
  const size_t header =
      roundUp(sizeof(detail::SegmentHeader) + size * sizeof(detail::RankSlot), kPage);
  return header + (2 * static_cast<size_t>(size) + 2) * resolveSlotBytes(size, options);
}

uint64_t Group::initialise(Segment& segment, int size, const GroupOptions& options) {
  ACCEL_CHECK(segment.size() == segmentBytes(size, options), "shared-memory segment ",
              segment.name(), " has ", segment.size(), " bytes, the group needs ",
              segmentBytes(size, options));
  std::random_device random;
  const uint64_t nonce = (static_cast<uint64_t>(random()) << 32) ^ random() ^ 1u;
  auto* h = new (segment.data()) Header{};
  h->version = kVersion;
  h->size = size;
  h->slot_bytes = resolveSlotBytes(size, options);
  h->nonce = nonce;
  h->failed.store(0);
  h->culprit = -1;
  h->streaming.store(1);
  auto* slots = reinterpret_cast<RankSlot*>(h + 1);
  for (int r = 0; r < size; ++r) new (&slots[r]) RankSlot{};
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;  // last: a joiner that sees it sees the rest
  return nonce;
}

Group::Group(Segment segment, int rank, int size, uint64_t nonce, const GroupOptions& options)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      options_(options),
      slot_bytes_(resolveSlotBytes(size, options)),
      pidfds_(static_cast<size_t>(size), -1),
      inputs_(static_cast<size_t>(size)),
      wires_(static_cast<size_t>(size)),
      parts_(static_cast<size_t>(size)) {
  ACCEL_CHECK(rank >= 0 && rank < size, "rank ", rank, " is not in [0, ", size, ")");
  const Header& h = header();
  ACCEL_CHECK(
      h.magic == kMagic && h.version == kVersion && h.size == size && h.slot_bytes == slot_bytes_ &&
          h.nonce == nonce,
      "shared-memory segment ", segment_.name(), " is not this group's (another job's, or another ",
      "version of libaccel: its header says ", h.size, " ranks, ", h.slot_bytes, "-byte slots)");
  if (options_.spin.count() > 0 && size_ > static_cast<int>(std::thread::hardware_concurrency())) {
    options_.spin =
        std::chrono::microseconds(0);  // more ranks than CPUs: a spinner steals the peer's CPU
  }
  RankSlot& me = slot(rank_);
  me.start_time = processStartTime(::getpid());
  me.pid.store(::getpid());
}

Group::~Group() {
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
}

Group::Header& Group::header() const { return *static_cast<Header*>(segment_.data()); }

Group::RankSlot& Group::slot(int rank) const {
  return reinterpret_cast<RankSlot*>(&header() + 1)[rank];
}

char* Group::staging(int set, int rank) const {
  const size_t base =
      segmentBytes(size_, options_) - (2 * static_cast<size_t>(size_) + 2) * slot_bytes_;
  return static_cast<char*>(segment_.data()) + base +
         (static_cast<size_t>(set) * size_ + rank) * slot_bytes_;
}

char* Group::result(int set) const {
  return staging(0, 0) + (2 * static_cast<size_t>(size_) + set) * slot_bytes_;
}

void Group::attach() {
  sync("attach (waiting for every rank to map the segment)", deadline());
  segment_.unlink();  // only the creator's Segment holds the name
  chooseStores();
}

// Stores::Auto: every rank runs the same split all-reduces of a 1 MiB probe (one to fault the
// pages in, then plain and streaming in turn, 3 each); rank 0 keeps the faster by its best time
// (each includes both sync points, so the slower rank's pace), publishes it, and all follow.
void Group::chooseStores() {
  if (options_.stores != Stores::Auto) {
    streaming_ = options_.stores == Stores::Streaming;
    return;
  }
  const size_t count = std::min(slot_bytes_, kProbeBytes) / sizeof(float);
  if (count * sizeof(float) <= options_.small_bytes) return;  // nothing is ever split
  std::vector<float> probe(count, 1.0f);
  const auto until = deadline();
  auto once = [&](bool streaming) {
    streaming_ = streaming;
    const auto start = Clock::now();
    reduceSplit(reinterpret_cast<char*>(probe.data()), count, DType::F32, Op::Max, until);
    return Clock::now() - start;
  };
  once(true);
  Clock::duration best[2] = {Clock::duration::max(), Clock::duration::max()};
  for (int round = 0; round < 3; ++round) {
    for (int streaming = 0; streaming < 2; ++streaming)
      best[streaming] = std::min(best[streaming], once(streaming == 1));
  }
  if (rank_ == 0) header().streaming.store(best[1] < best[0] ? 1 : 0, std::memory_order_relaxed);
  sync("attach (choosing the all-reduce's stores)", until);  // publishes rank 0's store
  streaming_ = header().streaming.load(std::memory_order_relaxed) == 1;
}

void Group::publish(char* to, const char* from, size_t bytes) const {
  if (streaming_)
    streamCopy(to, from, bytes);
  else
    std::memcpy(to, from, bytes);
}

void Group::checkHealthy() const {
  const int failed = header().failed.load(std::memory_order_acquire);
  if (failed) {
    const Header& h = header();
    throw Error("shared-memory group: rank " + std::to_string(failed - 1) +
                " stopped the group: rank " + std::to_string(h.culprit) +
                (h.culprit_died ? " died" : " did not arrive in time") + " (see rank " +
                std::to_string(failed - 1) + "'s error); this rank cannot go on");
  }
}

void Group::fail(const std::string& message, bool timeout, int culprit) {
  // The first to fail names the culprit for the others: a lock on `culprit` (a CAS from -1),
  // then `failed` published.
  Header& h = header();
  int32_t none = -1;
  if (__atomic_compare_exchange_n(&h.culprit, &none, culprit, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    h.culprit_died = timeout ? 0 : 1;
    int expected = 0;
    h.failed.compare_exchange_strong(expected, rank_ + 1, std::memory_order_release);
  }
  for (int r = 0; r < size_; ++r) futex(&slot(r).seq, FUTEX_WAKE, INT_MAX, nullptr);
  const std::string full = "shared-memory group, rank " + std::to_string(rank_) + ": " + message;
  if (timeout) throw TimeoutError(full);
  throw Error(full);
}

// Arrive at the next sync point, then wait until every rank did.
void Group::sync(const char* what, Clock::time_point deadline) {
  checkHealthy();
  const uint32_t target = ++phase_;
  RankSlot& me = slot(rank_);
  me.seq.store(target, std::memory_order_seq_cst);
  if (me.waiters.load(std::memory_order_seq_cst) > 0) futex(&me.seq, FUTEX_WAKE, INT_MAX, nullptr);
  for (int k = 1; k < size_; ++k) waitFor((rank_ + k) % size_, target, what, deadline);
}

void Group::waitFor(int peer, uint32_t target, const char* what, Clock::time_point deadline) {
  RankSlot& s = slot(peer);
  if (reached(s.seq.load(std::memory_order_acquire), target)) return;
  const auto spinUntil = Clock::now() + options_.spin;
  for (unsigned i = 1; options_.spin.count() > 0; ++i) {
    if (reached(s.seq.load(std::memory_order_acquire), target)) return;
    cpuRelax();
    if (i % 64 == 0 && Clock::now() >= spinUntil) break;
  }
  for (;;) {
    const uint32_t seen = s.seq.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    checkHealthy();
    if (Clock::now() >= deadline) {
      fail(std::string(what) + ": timed out after " + std::to_string(options_.timeout.count()) +
               " ms waiting for " + peerName(peer, s.pid.load()) + ", which is " +
               std::to_string(target - seen) + " sync point(s) behind",
           true, peer);
    }
    if (!sleepOn(peer, seen, deadline)) checkPeer(peer, what);
  }
}

// Sleeps until `peer`'s counter moves from `seen`, at most one liveness slice. Returns whether
// it was woken (else the caller checks that the peer lives).
bool Group::sleepOn(int peer, uint32_t seen, Clock::time_point deadline) {
  RankSlot& s = slot(peer);
  const auto wait = std::min<Clock::duration>(
      kLivenessSlice, std::max<Clock::duration>(deadline - Clock::now(), {}));
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
  timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  s.waiters.fetch_add(1, std::memory_order_seq_cst);
  const long rc = futex(&s.seq, FUTEX_WAIT, seen, &timeout);
  const int error = errno;
  s.waiters.fetch_sub(1, std::memory_order_seq_cst);
  return rc == 0 || error != ETIMEDOUT;
}

// Fails the operation when `peer` is dead. Its pidfd is opened once, after checking that the
// pid still names the process that attached (start time), so a reused pid is never trusted.
void Group::checkPeer(int peer, const char* what) {
  RankSlot& s = slot(peer);
  const int pid = s.pid.load(std::memory_order_acquire);
  if (pid == 0) return;  // not attached yet: only the timeout applies
  int& fd = pidfds_[static_cast<size_t>(peer)];
  if (fd < 0) {
    fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    const bool gone = fd < 0 ? errno == ESRCH : processStartTime(pid) != s.start_time;
    if (gone) {
      if (fd >= 0) ::close(fd);
      fd = -1;
      fail(std::string(what) + ": " + peerName(peer, pid) + " is gone (it exited or was killed)",
           false, peer);
    }
    if (fd < 0) return;  // no pidfds here (old kernel, another pid namespace): the timeout applies
  }
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) == 1) {
    fail(std::string(what) + ": " + peerName(peer, pid) + " died during the operation", false,
         peer);
  }
}

void Group::barrier() { sync("barrier", deadline()); }

void Group::broadcast(void* data, size_t bytes, int root) {
  const auto until = deadline();
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += slot_bytes_) {
    const size_t n = std::min(slot_bytes_, bytes - off);
    if (rank_ == root) std::memcpy(staging(set_, root), p + off, n);
    sync("broadcast", until);
    if (rank_ != root) std::memcpy(p + off, staging(set_, root), n);
    set_ ^= 1;
  }
}

void Group::allgather(const void* in, size_t bytes, void* out) {
  const auto until = deadline();
  const auto* src = static_cast<const char*>(in);
  auto* dst = static_cast<char*>(out);
  for (size_t off = 0; off < bytes; off += slot_bytes_) {
    const size_t n = std::min(slot_bytes_, bytes - off);
    std::memcpy(staging(set_, rank_), src + off, n);
    sync("all-gather", until);
    for (int r = 0; r < size_; ++r)
      std::memcpy(dst + static_cast<size_t>(r) * bytes + off, staging(set_, r), n);
    set_ ^= 1;
  }
}

void Group::allreduce(void* data, size_t count, DType dtype, Op op) {
  const auto until = deadline();
  const size_t elem = dtypeSize(dtype);
  const size_t piece = slot_bytes_ / elem;
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < count; off += piece) {
    const size_t n = std::min(piece, count - off);
    if (n * elem <= options_.small_bytes)
      reduceSmall(p + off * elem, n, dtype, op, until);
    else
      reduceSplit(p + off * elem, n, dtype, op, until);
  }
}

// Every rank combines every slot into its own buffer: one sync point.
void Group::reduceSmall(char* data, size_t count, DType dtype, Op op, Clock::time_point deadline) {
  std::memcpy(staging(set_, rank_), data, count * dtypeSize(dtype));
  sync("all-reduce", deadline);
  for (int r = 0; r < size_; ++r) inputs_[r] = staging(set_, r);
  reduce(data, inputs_.data(), size_, count, dtype, op);
  set_ ^= 1;
}

std::pair<size_t, size_t> Group::sliceOf(int r, size_t count, size_t elem) const {
  const size_t per = roundUp((count + size_ - 1) / size_, kLine / elem);
  const size_t lo = std::min(count, per * static_cast<size_t>(r));
  return {lo, std::min(count, lo + per) - lo};
}

// Each rank reduces its own slice, then copies the others' slices of the result. Only what the
// others read crosses the segment, with the chosen stores (Stores): a rank publishes the others'
// slices of its data, reduces its own slice in place in `data` (its own part read from there)
// while mirroring the result into the result area (streaming) or copies it there after (plain,
// from this core's cache), and after the second sync point fetches the other slices from there.
void Group::reduceSplit(char* data, size_t count, DType dtype, Op op, Clock::time_point deadline) {
  const size_t elem = dtypeSize(dtype);
  const auto slice = [&](int r) {
    const auto [lo, n] = sliceOf(r, count, elem);
    return std::pair<size_t, size_t>{lo * elem, n * elem};
  };
  char* mine = staging(set_, rank_);
  for (int r = 0; r < size_; ++r) {
    const auto [at, bytes] = slice(r);
    if (r != rank_ && bytes) publish(mine + at, data + at, bytes);
  }
  sync("all-reduce", deadline);
  const auto [at, bytes] = slice(rank_);
  if (bytes) {
    for (int r = 0; r < size_; ++r) inputs_[r] = r == rank_ ? data + at : staging(set_, r) + at;
    char* mirror = result(set_) + at;
    reduce(data + at, inputs_.data(), size_, bytes / elem, dtype, op,
           streaming_ ? mirror : nullptr);
    if (!streaming_) std::memcpy(mirror, data + at, bytes);  // from this core's cache
  }
  sync("all-reduce", deadline);
  for (int r = 0; r < size_; ++r) {
    const auto [from, n] = slice(r);
    if (r != rank_ && n) std::memcpy(data + from, result(set_) + from, n);
  }
  // No switch of sets: after the second sync point nobody reads the slots any more, and the
  // result area is written again only after the next sync point, which a rank reaches once it
  // copied this result out.
}

void Group::allreduceBf16Wire(float* data, size_t count, float scale) {
  const auto until = deadline();
  const size_t piece = slot_bytes_ / sizeof(uint16_t);
  for (size_t off = 0; off < count; off += piece) {
    const size_t n = std::min(piece, count - off);
    if (n * sizeof(uint16_t) <= options_.small_bytes)
      wireSmall(data + off, n, scale, until);
    else
      wireSplit(data + off, n, scale, until);
  }
}

// Every rank publishes its part as bf16 and sums every slot: one sync point.
void Group::wireSmall(float* data, size_t count, float scale, Clock::time_point deadline) {
  toBf16(reinterpret_cast<uint16_t*>(staging(set_, rank_)), data, count, scale);
  sync("all-reduce", deadline);
  for (int r = 0; r < size_; ++r) wires_[r] = reinterpret_cast<const uint16_t*>(staging(set_, r));
  sumBf16Wire(data, nullptr, -1, wires_.data(), size_, count, nullptr);
  set_ ^= 1;
}

// As reduceSplit, in bf16 between the ranks: a rank publishes the others' slices rounded to bf16,
// sums its own slice (its own part rounded as it reads it) into `data` and, as bf16, into the
// result area, and after the second sync point widens the others' slices of the result from there.
void Group::wireSplit(float* data, size_t count, float scale, Clock::time_point deadline) {
  auto* mine = reinterpret_cast<uint16_t*>(staging(set_, rank_));
  for (int r = 0; r < size_; ++r) {
    const auto [lo, n] = sliceOf(r, count, sizeof(uint16_t));
    if (r != rank_ && n) toBf16(mine + lo, data + lo, n, scale);
  }
  sync("all-reduce", deadline);
  auto* sum = reinterpret_cast<uint16_t*>(result(set_));
  const auto [lo, n] = sliceOf(rank_, count, sizeof(uint16_t));
  if (n) {
    for (int r = 0; r < size_; ++r)
      wires_[r] = reinterpret_cast<const uint16_t*>(staging(set_, r)) + lo;
    sumBf16Wire(data + lo, data + lo, rank_, wires_.data(), size_, n, sum + lo, scale);
  }
  sync("all-reduce", deadline);
  for (int r = 0; r < size_; ++r) {
    const auto [from, len] = sliceOf(r, count, sizeof(uint16_t));
    if (r != rank_ && len) fromBf16(data + from, sum + from, len);
  }
}

void Group::allreduceMean(float* data, size_t count, float scale) {
  const auto until = deadline();
  const size_t piece = slot_bytes_ / sizeof(float);
  for (size_t off = 0; off < count; off += piece) {
    const size_t n = std::min(piece, count - off);
    if (n * sizeof(float) <= options_.small_bytes) {
      meanSmall(data + off, n, scale, until);
    } else if (streaming_) {  // the streamed publish copies as they are: scale in a pass first
      scaleCopy(data + off, data + off, scale, n);
      reduceSplit(reinterpret_cast<char*>(data + off), n, DType::F32, Op::Sum, until);
    } else {
      meanSplit(data + off, n, scale, until);
    }
  }
}

// Every rank publishes its part scaled and sums every slot: one sync point.
void Group::meanSmall(float* data, size_t count, float scale, Clock::time_point deadline) {
  scaleCopy(reinterpret_cast<float*>(staging(set_, rank_)), data, scale, count);
  sync("all-reduce", deadline);
  for (int r = 0; r < size_; ++r) parts_[r] = reinterpret_cast<const float*>(staging(set_, r));
  sumOwnScaled(data, parts_.data(), -1, scale, size_, count);
  set_ ^= 1;
}

// As reduceSplit with plain stores, scaling on the way: a rank publishes the others' slices
// scaled, sums its own slice (its own part scaled as it reads it) into `data`, copies that sum to
// the result area from its cache, and after the second sync point fetches the others' slices.
void Group::meanSplit(float* data, size_t count, float scale, Clock::time_point deadline) {
  auto* mine = reinterpret_cast<float*>(staging(set_, rank_));
  for (int r = 0; r < size_; ++r) {
    const auto [lo, n] = sliceOf(r, count, sizeof(float));
    if (r != rank_ && n) scaleCopy(mine + lo, data + lo, scale, n);
  }
  sync("all-reduce", deadline);
  auto* sum = reinterpret_cast<float*>(result(set_));
  const auto [lo, n] = sliceOf(rank_, count, sizeof(float));
  if (n) {
    for (int r = 0; r < size_; ++r)
      parts_[r] = r == rank_ ? data + lo : reinterpret_cast<const float*>(staging(set_, r)) + lo;
    sumOwnScaled(data + lo, parts_.data(), rank_, scale, size_, n);
    std::memcpy(sum + lo, data + lo, n * sizeof(float));
  }
  sync("all-reduce", deadline);
  for (int r = 0; r < size_; ++r) {
    const auto [from, len] = sliceOf(r, count, sizeof(float));
    if (r != rank_ && len) std::memcpy(data + from, sum + from, len * sizeof(float));
  }
}

}  // namespace accel::shm
