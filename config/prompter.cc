#include "config/prompter.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>

namespace accel::config {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::optional<int> parseInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

Expected<void> Prompter::ask(
    const std::string& question, const std::string& prompt,
    const std::function<std::optional<std::string>(const std::string&)>& accept) {
  while (true) {
    out_ << prompt << std::flush;
    std::string line;
    if (!std::getline(in_, line)) {
      out_ << "\n";
      return makeError("end of input before an answer to \"" + question +
                       "\"; nothing was written");
    }
    auto problem = accept(trim(line));
    if (!problem) return {};
    out_ << "  Invalid answer: " << *problem << "\n";
  }
}

namespace {

// "0 (No distributed training), 1 (multi-CPU) or 4 (multi-GPU)": what may be chosen instead.
std::string supportedChoices(const std::vector<Prompter::Option>& options) {
  std::vector<std::string> names;
  for (size_t i = 0; i < options.size(); ++i) {
    if (options[i].supported()) names.push_back(std::to_string(i) + " (" + options[i].label + ")");
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace

Expected<int> Prompter::menu(const std::string& question, const std::vector<Option>& options,
                             int defaultIndex, Check<int> check) {
  std::string prompt = question + "\n";
  for (size_t i = 0; i < options.size(); ++i) {
    const auto& o = options[i];
    prompt +=
        "  [" + std::to_string(i) + "] " + o.label +
        (o.supported() ? "" : " (" + (o.tag.empty() ? "not supported by accel" : o.tag) + ")") +
        "\n";
  }
  prompt += "Enter a number [" + std::to_string(defaultIndex) + "]: ";
  int chosen = defaultIndex;
  auto ok = ask(question, prompt, [&](const std::string& answer) -> std::optional<std::string> {
    int index = -1;
    if (answer.empty()) {
      index = defaultIndex;
    } else if (auto n = parseInt(answer)) {
      index = *n;
    } else {
      for (size_t i = 0; i < options.size(); ++i) {
        if (lower(options[i].label) == lower(answer)) index = static_cast<int>(i);
      }
    }
    if (index < 0 || index >= static_cast<int>(options.size())) {
      return "'" + answer + "' is not a choice; enter a number from 0 to " +
             std::to_string(options.size() - 1);
    }
    if (const auto& o = options[static_cast<size_t>(index)]; !o.supported()) {
      return (o.tag.empty() ? o.label + " is not supported by accel (" + o.unsupported + ")"
                            : o.label + " " + o.unsupported) +
             "; choose " + supportedChoices(options);
    }
    if (check) {
      if (auto problem = check(index)) return problem;
    }
    chosen = index;
    return std::nullopt;
  });
  if (!ok) return std::move(ok).takeError();
  return chosen;
}

Expected<bool> Prompter::yesNo(const std::string& question, bool defaultValue) {
  std::string prompt = question + (defaultValue ? " [YES/no]: " : " [yes/NO]: ");
  bool result = defaultValue;
  auto ok = ask(question, prompt, [&](const std::string& answer) -> std::optional<std::string> {
    std::string a = lower(answer);
    if (a.empty()) return std::nullopt;
    if (a == "yes" || a == "y") {
      result = true;
      return std::nullopt;
    }
    if (a == "no" || a == "n") {
      result = false;
      return std::nullopt;
    }
    return "please enter yes or no (or y/n)";
  });
  if (!ok) return std::move(ok).takeError();
  return result;
}

Expected<int> Prompter::integer(const std::string& question, std::optional<int> defaultValue,
                                Check<int> check) {
  std::string prompt =
      question + (defaultValue ? " [" + std::to_string(*defaultValue) + "]: " : ": ");
  int result = 0;
  auto ok = ask(question, prompt, [&](const std::string& answer) -> std::optional<std::string> {
    std::optional<int> n = answer.empty() ? defaultValue : parseInt(answer);
    if (!n) return answer.empty() ? "an answer is required" : "'" + answer + "' is not an integer";
    if (check) {
      if (auto problem = check(*n)) return problem;
    }
    result = *n;
    return std::nullopt;
  });
  if (!ok) return std::move(ok).takeError();
  return result;
}

Expected<std::string> Prompter::text(const std::string& question,
                                     std::optional<std::string> defaultValue,
                                     Check<std::string> check) {
  std::string prompt = question + (defaultValue ? " [" + *defaultValue + "]: " : ": ");
  std::string result;
  auto ok = ask(question, prompt, [&](const std::string& answer) -> std::optional<std::string> {
    std::string value = answer.empty() && defaultValue ? *defaultValue : answer;
    if (check) {
      if (auto problem = check(value)) return problem;
    }
    result = value;
    return std::nullopt;
  });
  if (!ok) return std::move(ok).takeError();
  return result;
}

}  // namespace accel::config
