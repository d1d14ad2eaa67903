#pragma once
// Prompter: asks one question at a time on a stream pair, shows the default, re-asks with the
// reason on an invalid answer, and reports end of input as an error. Works the same on a
// terminal and on piped stdin (menus are answered by number, never with arrow keys). Every
// question blocks on `in` until a line is read; nothing throws (unless a check does).

#include <functional>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "libaccel/common/expected.h"

namespace accel::config {

class Prompter {
 public:
  // A check returns why an answer is unacceptable, or nullopt to accept it.
  template <typename T>
  using Check = std::function<std::optional<std::string>(const T&)>;

  Prompter(std::istream& in, std::ostream& out) : in_(in), out_(out) {}

  // A numbered menu; the answer is an index or an option's text (any case). Returns the index.
  Expected<int> menu(const std::string& question, const std::vector<std::string>& options,
                     int defaultIndex, Check<int> check = {});

  // yes/no (also y/n, any case), shown as [yes/NO] or [YES/no].
  Expected<bool> yesNo(const std::string& question, bool defaultValue);

  // An integer; `defaultValue` is used for an empty answer when set.
  Expected<int> integer(const std::string& question, std::optional<int> defaultValue, Check<int> check = {});

  // Free text, trimmed; `defaultValue` is used for an empty answer when set.
  Expected<std::string> text(const std::string& question, std::optional<std::string> defaultValue,
                             Check<std::string> check = {});

 private:
  // Shows `prompt`, reads lines until `accept` returns nullopt (the answer was taken), and
  // prints each rejection's reason. End of input is an error naming the question.
  Expected<void> ask(const std::string& question, const std::string& prompt,
                     const std::function<std::optional<std::string>(const std::string&)>& accept);

  std::istream& in_;
  std::ostream& out_;
};

}  // namespace accel::config
