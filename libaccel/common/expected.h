#pragma once
// Expected<T>: a value or an error message, for failures a caller is expected to handle
// (a bad file, a taken port, a worker that exited non-zero). config/ and launcher/ return it
// instead of throwing; libaccel itself, which runs beside LibTorch, throws accel::Error.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace accel {

// The error side of an Expected. `message` is complete and user-facing: it already names the
// thing that is wrong (file:line:col, flag, host:port).
struct Error {
  std::string message;
};

inline Error makeError(std::string message) { return Error{std::move(message)}; }

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}       // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // Precondition: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // Precondition: !ok().
  const std::string& error() const { return std::get<Error>(v_).message; }
  Error takeError() && { return std::get<Error>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Expected<void>: success or an error.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)) {}   // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_->message; }
  Error takeError() && { return std::move(*error_); }

 private:
  std::optional<Error> error_;
};

}  // namespace accel
