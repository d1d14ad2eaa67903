#pragma once
// A raw TCP connection to a store on loopback, for tests that speak bytes directly.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

namespace accel::store::testing {

// Connects to 127.0.0.1:port; -1 on failure. A non-zero receiveBuffer is set before connecting,
// so the kernel does not grow the window (and absorb the replies). Replies wait at most 5 s.
inline int connectLoopback(int port, int receiveBuffer = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (receiveBuffer) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? fd : -1;
}

// Reads exactly n bytes, or fewer if the connection ends or a read times out (5 s each).
inline std::string readExactly(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, out.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

}  // namespace accel::store::testing
