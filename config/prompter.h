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

  // One entry of a menu. An entry accel does not support stays in the menu (so numbers match
  // accelerate's) but is shown as "multi-XPU (not supported by accel)" and refused when chosen,
  // with `unsupported` as the reason, before any further question. An entry unavailable here
  // rather than in accel (fp16 on a CPU configuration) shows its own tag, "fp16 (needs a GPU)",
  // and is refused as "fp16 needs a GPU ...".
  struct Option {
    std::string label;
    std::string unsupported;  // empty: supported; else why accel refuses it (shown when chosen)
    std::string tag;          // shown after the label when refused; empty: not supported by accel

    Option(const char* l) : label(l) {}  // NOLINT(google-explicit-constructor): menus read as lists
    Option(std::string l) : label(std::move(l)) {}  // NOLINT(google-explicit-constructor)
    Option(std::string l, std::string why) : label(std::move(l)), unsupported(std::move(why)) {}
    bool supported() const { return unsupported.empty(); }
  };

  Prompter(std::istream& in, std::ostream& out) : in_(in), out_(out) {}

  // A numbered menu; the answer is an index or an option's label (any case). An unsupported
  // option is refused with its reason and the supported choices. Returns the index.
  // `defaultIndex` must name a supported option.
  Expected<int> menu(const std::string& question, const std::vector<Option>& options,
                     int defaultIndex, Check<int> check = {});

  // yes/no (also y/n, any case), shown as [yes/NO] or [YES/no].
  Expected<bool> yesNo(const std::string& question, bool defaultValue);

  // An integer; `defaultValue` is used for an empty answer when set.
  Expected<int> integer(const std::string& question, std::optional<int> defaultValue,
                        Check<int> check = {});

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
