#pragma once
// Errors thrown by libaccel (public API: training programs catch accel::Error). libaccel runs
// inside training programs next to LibTorch, which throws, so failures are exceptions that
// carry the place they were raised and the values that explain them. config/ and launcher/
// use Expected (libaccel/common/expected.h) instead.

#include <sstream>
#include <stdexcept>
#include <string>

namespace accel {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking call ran out of time; the message says what was awaited, for how long, and the
// progress made.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The peer broke the protocol, closed the connection, or could not be reached.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// A server could not listen because its port is taken (EADDRINUSE).
class AddressInUseError : public NetworkError {
 public:
  using NetworkError::NetworkError;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace accel

// ACCEL_CHECK(cond, parts...): throws accel::Error("file:line: parts...") when cond is false.
#define ACCEL_CHECK(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      throw ::accel::Error(::accel::detail::concat(__FILE__, ":", __LINE__, ": ", __VA_ARGS__)); \
    }                                                                                            \
  } while (0)
