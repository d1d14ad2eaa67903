#include "libaccel/store/tcp_connect.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace accel::store {
namespace {

using Clock = std::chrono::steady_clock;

// One connect() of `fd` to `address`, given until `deadline`: a non-blocking connect polled for
// completion, so that a path whose packets vanish costs at most that long (a blocking connect()
// waits out the kernel's SYN retries, over two minutes). Returns 0, or the errno (ETIMEDOUT when
// the deadline came first).
int connectUntil(int fd, const addrinfo& address, Clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int err = 0;
  if (::connect(fd, address.ai_addr, address.ai_addrlen) != 0) err = errno;
  while (err == EINPROGRESS || err == EINTR) {
    // Looked at once more when the time is up: an answer already there counts.
    const auto left = std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd pfd{fd, POLLOUT, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0) {
      err = errno == EINTR ? EINPROGRESS : errno;
    } else if (ready > 0) {
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    } else if (left == 0) {
      err = ETIMEDOUT;
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  return err;
}

}  // namespace

int connectTcp(const std::string& host, int port, Clock::time_point deadline, std::string& why) {
  int error = 0;
  return connectTcp(host, port, deadline, why, error);
}

int connectTcp(const std::string& host, int port, Clock::time_point deadline, std::string& why,
               int& error) {
  error = 0;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int err = connectUntil(fd, *a, deadline);
    error = err;
    if (err == 0) break;
    why = err == ETIMEDOUT ? "no answer" : std::strerror(err);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

}  // namespace accel::store
