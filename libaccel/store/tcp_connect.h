#pragma once
// A TCP connection made within a deadline, for the clients of the job's store and of etcd.

#include <chrono>
#include <string>

namespace accel::store {

// Tries once to connect to host:port (each address it resolves to in turn), each connect()
// non-blocking and polled until `deadline`: a path whose packets vanish costs at most that long
// (a blocking connect() waits out the kernel's SYN retries, over two minutes). Returns the
// socket (blocking, close-on-exec, TCP_NODELAY), or -1 with what went wrong in `why` ("no
// answer" when the deadline came first, else strerror's or getaddrinfo's text).
int connectTcp(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
               std::string& why);
// The same, and the errno of the last failed try in `error` (ETIMEDOUT when the deadline came
// first, 0 when the name did not resolve or a connection was made): ECONNREFUSED tells a host that
// answers with nothing listening from one that does not answer.
int connectTcp(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
               std::string& why, int& error);

}  // namespace accel::store
