#include "libaccel/comm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace accel::shm {
namespace {

std::string sanitizeTag(const std::string& tag) {
  std::string out;
  for (char c : tag) {
    if (out.size() == 40) break;
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    out += plain ? c : '_';
  }
  return out.empty() ? "job" : out;
}

std::string randomHex() {
  std::random_device random;
  std::ostringstream out;
  out << std::hex << random() << random();
  return out.str();
}

std::string systemError(const std::string& what, const std::string& name) {
  return what + " shared-memory segment /dev/shm/" + name + ": " + std::strerror(errno);
}

// Parses "<uid>-<pid>-<start>-..." after the prefix.
bool parseCreator(const std::string& name, unsigned long& uid, int& pid, unsigned long long& start) {
  const std::string prefix = kSegmentPrefix;
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  std::istringstream in(name.substr(prefix.size()));
  char dash1 = 0, dash2 = 0, dash3 = 0;
  in >> uid >> dash1 >> pid >> dash2 >> start >> dash3;
  return !in.fail() && dash1 == '-' && dash2 == '-' && dash3 == '-' && pid > 0;
}

// /proc/<pid>/stat's state (field 3) and start time (field 22); false when unreadable.
bool readProcStat(int pid, char& state, unsigned long long& start) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (comm) may hold spaces and parentheses: count fields after its last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3) state = field[0];
    if (i == 22) {
      start = std::strtoull(field.c_str(), nullptr, 10);
      return true;
    }
  }
  return false;
}

}  // namespace

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
  s.name_ = std::string(kSegmentPrefix) + std::to_string(::getuid()) + "-" + std::to_string(::getpid()) + "-" +
            std::to_string(processStartTime(::getpid())) + "-" + sanitizeTag(tag) + "-" + randomHex();
  const int fd = ::shm_open(("/" + s.name_).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return makeError(systemError("cannot create the", s.name_));
  s.linked_ = true;
  // Reserve the pages now: on a full /dev/shm a write to a mapped hole is a SIGBUS, not an error.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (reserved != 0) {
    ::close(fd);
    errno = reserved;
    return makeError(systemError("no room (" + std::to_string(bytes >> 20) + " MiB) in /dev/shm for the", s.name_) +
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
  if (::fstat(fd, &st) != 0 || st.st_uid != ::getuid() || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    return makeError("shared-memory segment /dev/shm/" + name + " is not this user's or not " + std::to_string(bytes) +
                     " bytes long");
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

bool isStaleSegmentName(const std::string& name) {
  unsigned long uid = 0;
  int pid = 0;
  unsigned long long start = 0;
  if (!parseCreator(name, uid, pid, start) || uid != ::getuid()) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  char state = 0;
  unsigned long long now = 0;
  if (!readProcStat(pid, state, now)) return false;  // raced with its exit: the next sweep sees it
  return state == 'Z' || now != start;  // a zombie is dead; another start time, another process
}

std::vector<std::string> sweepStaleSegments(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  while (dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (!isStaleSegmentName(name)) continue;
    if (::unlink((dir + "/" + name).c_str()) == 0) removed.push_back(name);
  }
  ::closedir(d);
  return removed;
}

}  // namespace accel::shm
