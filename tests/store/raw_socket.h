#pragma once
// A raw TCP connection to a store on loopback, for tests that speak bytes directly.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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

}  // namespace accel::store::testing
