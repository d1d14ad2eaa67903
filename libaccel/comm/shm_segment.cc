#include "libaccel/comm/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

namespace accel::shm {
namespace {

std::string randomHex() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << random() << random();
  return out.str();
}

std::string systemError(const std::string& what, const std::string& name) {
  return what + " shared-memory segment /dev/shm/" + name + ": " + std::strerror(errno);
}

// Everything below down to sweepStaleSegments is async-signal-safe (system calls on stack
// buffers, no allocation): the agent's guard runs it in a fork of the multi-threaded agent.

// Reads an unsigned decimal at *p, advancing it; false when there is none.
bool readNumber(const char*& p, unsigned long long& value) {
  if (*p < '0' || *p > '9') return false;
  value = 0;
  for (; *p >= '0' && *p <= '9'; ++p)
    value = value * 10 + static_cast<unsigned long long>(*p - '0');
  return true;
}

// Parses "<uid>-<pid>-<start>-..." after the prefix.
bool parseCreator(const char* name, unsigned long long& uid, unsigned long long& pid,
                  unsigned long long& start) {
  for (const char* q = kSegmentPrefix; *q; ++q, ++name) {
    if (*name != *q) return false;
  }
  return readNumber(name, uid) && *name++ == '-' && readNumber(name, pid) && *name++ == '-' &&
         readNumber(name, start) && *name == '-' && pid > 0 && pid < (1ull << 31);
}

// Writes "/proc/<pid>/stat" into `path` (at least 32 bytes).
void procStatPath(unsigned long long pid, char* path) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid);
  const char* head = "/proc/";
  int k = 0;
  for (; *head; ++head) path[k++] = *head;
  while (n) path[k++] = digits[--n];
  for (const char* tail = "/stat"; *tail; ++tail) path[k++] = *tail;
  path[k] = '\0';
}

// /proc/<pid>/stat's state (field 3) and start time (field 22); false when unreadable.
bool readProcStat(unsigned long long pid, char& state, unsigned long long& start) {
  char path[32];
  procStatPath(pid, path);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // Field 2 (comm) may hold spaces and parentheses: count fields after its last ')'.
  const char* p = nullptr;
  for (const char* q = buf; *q; ++q) {
    if (*q == ')') p = q + 1;
  }
  if (!p) return false;
  for (int field = 3; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (!*p) return false;
    if (field == 3) state = *p;
    if (field == 22) return readNumber(p, start);
    while (*p && *p != ' ') ++p;
  }
  return false;
}

}  // namespace

std::string segmentTag(const std::string& tag) {
  std::string out;
  for (char c : tag) {
    if (out.size() == 40) break;
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_';
    out += plain ? c : '_';
  }
  return out.empty() ? "job" : out;
}

unsigned long long processStartTime(int pid) {
  char state = 0;
  unsigned long long start = 0;
  return readProcStat(pid, state, start) ? start : 0;
}

Segment::~Segment() { release(); }

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    linked_ = other.linked_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.linked_ = false;
  }
  return *this;
}

void Segment::release() {
  unlink();
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void Segment::unlink() {
  if (linked_) ::shm_unlink(("/" + name_).c_str());
  linked_ = false;
}

Expected<Segment> Segment::create(const std::string& tag, size_t bytes) {
  Segment s;
  s.name_ = std::string(kSegmentPrefix) + std::to_string(::getuid()) + "-" +
            std::to_string(::getpid()) + "-" + std::to_string(processStartTime(::getpid())) + "-" +
            segmentTag(tag) + "-" + randomHex();
  const int fd = ::shm_open(("/" + s.name_).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return makeError(systemError("cannot create the", s.name_));
  s.linked_ = true;
  // Reserve the pages now: on a full /dev/shm a write to a mapped hole is a SIGBUS, not an error.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (reserved != 0) {
    ::close(fd);
    errno = reserved;
    return makeError(
        systemError("no room (" + std::to_string(bytes >> 20) + " MiB) in /dev/shm for the",
                    s.name_) +
        " (grow /dev/shm, or set ACCEL_CPU_BACKEND=gloo)");
  }
  s.data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (s.data_ == MAP_FAILED) {
    s.data_ = nullptr;
    return makeError(systemError("cannot map the", s.name_));
  }
  s.size_ = bytes;
  return s;
}

Expected<Segment> Segment::open(const std::string& name, size_t bytes) {
  Segment s;
  s.name_ = name;
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return makeError(systemError("cannot open the", name));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_uid != ::getuid() ||
      static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    return makeError("shared-memory segment /dev/shm/" + name + " is not this user's or not " +
                     std::to_string(bytes) + " bytes long");
  }
  s.data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (s.data_ == MAP_FAILED) {
    s.data_ = nullptr;
    return makeError(systemError("cannot map the", name));
  }
  s.size_ = bytes;
  return s;
}

bool isStaleSegmentName(const char* name) {
  unsigned long long uid = 0, pid = 0, start = 0;
  if (!parseCreator(name, uid, pid, start) || uid != ::getuid()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  char state = 0;
  unsigned long long now = 0;
  if (!readProcStat(pid, state, now)) return false;  // raced with its exit: the next sweep sees it
  return state == 'Z' || now != start;  // a zombie is dead; another start time, another process
}

int sweepStaleSegments(const char* dir) {
  const int dirFd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) return 0;
  int removed = 0;
  alignas(8) char buf[8192];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dirFd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
      unsigned short reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char* name = buf + off + 19;
      if (isStaleSegmentName(name) && ::unlinkat(dirFd, name, 0) == 0) ++removed;
      off += reclen;
    }
  }
  ::close(dirFd);
  return removed;
}

}  // namespace accel::shm
