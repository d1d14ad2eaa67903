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
struct ErrorMessage {
  std::string message;
};

inline ErrorMessage makeError(std::string message) { return ErrorMessage{std::move(message)}; }

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}             // NOLINT: implicit by design
  Expected(ErrorMessage error) : v_(std::move(error)) {}  // NOLINT: implicit by design

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
  const std::string& error() const { return std::get<ErrorMessage>(v_).message; }
  ErrorMessage takeError() && { return std::get<ErrorMessage>(std::move(v_)); }

 private:
  std::variant<T, ErrorMessage> v_;
};

// Expected<void>: success or an error.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(ErrorMessage error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_->message; }
  ErrorMessage takeError() && { return std::move(*error_); }

 private:
  std::optional<ErrorMessage> error_;
};

}  // namespace accel
