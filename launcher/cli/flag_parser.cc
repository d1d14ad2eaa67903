// The parser of `accel launch` / `accel run` (launch_flags.h): argparse's rules over the table.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/schema.h"
#include "launcher/base/text.h"
#include "launcher/cli/launch_flags.h"

namespace accel::launcher {
using nlohmann::json;
namespace {

// Every way to write the flag: its names, and "--a-b" for each long "--a_b" (argparse in both
// accelerate and torchrun accepts either).
std::vector<std::string> spellingsOf(const FlagSpec& f) {
  std::vector<std::string> out;
  for (auto name : f.names) {
    out.emplace_back(name);
    if (name.size() > 2 && name.substr(0, 2) == "--" && name.find('_') != std::string_view::npos) {
      std::string dashed(name);
      std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
      out.push_back(dashed);
    }
  }
  return out;
}

struct Match {
  const FlagSpec* spec = nullptr;
};

// The flag `word` names: an exact spelling, else the one long flag it is a prefix of (argparse's
// abbreviations). Ambiguous and unknown words are errors naming the candidates.
Expected<Match> findFlag(const std::string& word, LaunchMode mode) {
  const FlagSpec* prefixOf = nullptr;
  std::set<std::string> candidates;
  for (const auto& f : launchFlags()) {
    if (!allowedIn(f, mode)) continue;
    for (const auto& s : spellingsOf(f)) {
      if (s == word) return Match{&f};
      if (word.size() > 2 && word.rfind("--", 0) == 0 && s.rfind(word, 0) == 0) {
        if (prefixOf != nullptr && prefixOf->dest != f.dest)
          candidates.insert(std::string(prefixOf->names.front()));
        if (prefixOf == nullptr || prefixOf->dest != f.dest)
          candidates.insert(std::string(f.names.front()));
        prefixOf = &f;
      }
    }
  }
  if (candidates.size() == 1) return Match{prefixOf};
  if (candidates.size() > 1) {
    std::string list;
    for (const auto& c : candidates) list += (list.empty() ? "" : ", ") + c;
    return makeError(word + ": ambiguous, it could be " + list);
  }
  if (mode == LaunchMode::Torchrun) {
    for (const auto& f : launchFlags()) {
      for (const auto& s : spellingsOf(f)) {
        if (s == word)
          return makeError("unknown flag " + word +
                           ": torchrun has no such flag (accel launch takes it)");
      }
    }
  }
  std::string closest;
  // A third of the word, and two more: `--num_procs` is 4 from --num_processes.
  size_t best = std::max<size_t>(2, word.size() / 3) + 2;
  for (const auto& f : launchFlags()) {
    if (!allowedIn(f, mode)) continue;
    for (const auto& s : spellingsOf(f)) {
      const size_t d = config::editDistance(word, s);
      if (d < best) best = d, closest = std::string(f.names.front());
    }
  }
  if (!closest.empty())
    return makeError("unknown flag " + word + " (did you mean " + closest + "?)");
  return makeError("unknown flag " + word + " (flags go before the training script; see --help)");
}

// Python's int(): surrounding whitespace, a sign, digits with single underscores between them.
std::optional<long long> pythonInt(std::string text) {
  text.erase(0, text.find_first_not_of(" \t\n"));
  text.erase(text.find_last_not_of(" \t\n") + 1);
  std::string digits;
  size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  for (size_t j = i; j < text.size(); ++j) {
    const char c = text[j];
    if (c == '_' && j > i && j + 1 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[j - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[j + 1]))) {
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    digits += c;
  }
  if (digits.empty()) return std::nullopt;
  long long value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return text[0] == '-' ? -value : value;
}

// Python's float(): decimal and exponent forms, inf/infinity/nan in any case; no hex.
std::optional<double> pythonFloat(std::string text) {
  text.erase(0, text.find_first_not_of(" \t\n"));
  text.erase(text.find_last_not_of(" \t\n") + 1);
  if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  std::string clean;
  for (size_t j = 0; j < text.size(); ++j) {
    if (text[j] == '_' && j > 0 && j + 1 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[j - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[j + 1]))) {
      continue;
    }
    clean += text[j];
  }
  char* end = nullptr;
  const double value = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return value;
}

std::optional<int> strToBool(std::string text) {
  text = lowerCase(std::move(text));
  for (const char* t : {"y", "yes", "t", "true", "on", "1"}) {
    if (text == t) return 1;
  }
  for (const char* f : {"n", "no", "f", "false", "off", "0"}) {
    if (text == f) return 0;
  }
  return std::nullopt;
}

// The text of a value converted as the flag's Python parser converts it.
Expected<json> convert(const FlagSpec& f, const std::string& name, const std::string& text) {
  auto bad = [&](const char* what) { return makeError(name + ": '" + text + "' is not " + what); };
  json value;
  switch (f.type) {
    case FlagType::Str:
      value = text;
      break;
    case FlagType::Int: {
      auto v = pythonInt(text);
      if (!v) return bad("an integer");
      value = *v;
      break;
    }
    case FlagType::Float: {
      auto v = pythonFloat(text);
      if (!v) return bad("a number");
      value = *v;
      break;
    }
    case FlagType::StrToBool: {
      auto v = strToBool(text);
      if (!v) return bad("a truth value (yes/no, true/false, on/off, 1/0)");
      value = *v;
      break;
    }
    case FlagType::PyBool:
      value = !text.empty();
      break;
    case FlagType::BoolTuple: {
      value = json::array();
      for (std::string_view item : splitOn(text, ',')) {
        auto v = strToBool(std::string(item));
        if (!v) return bad("a comma-separated list of truth values");
        value.push_back(*v);
      }
      break;
    }
  }
  if (!f.choices.empty()) {
    const std::string shown = value.is_string() ? value.get<std::string>() : value.dump();
    if (std::find(f.choices.begin(), f.choices.end(), shown) == f.choices.end()) {
      std::string list;
      for (auto c : f.choices) list += (list.empty() ? "" : ", ") + std::string(c);
      return makeError(name + ": '" + text + "' is not one of " + list);
    }
  }
  return value;
}

// The namespace before any flag: each dest's default, string defaults converted by the type
// (argparse's rule); torchrun's flags take PET_<DEST> from the environment in Torchrun mode.
ParsedLaunchFlags defaultsOf(LaunchMode mode, const probes::Environment& env) {
  ParsedLaunchFlags parsed;
  parsed.mode = mode;
  for (const auto& f : launchFlags()) {
    if (parsed.values.count(std::string(f.dest))) continue;  // the first of a shared dest sets it
    json def = json::parse(f.default_json);
    if (def.is_string() && f.type != FlagType::Str) {
      auto converted = convert(f, std::string(f.names.front()), def.get<std::string>());
      if (converted) def = *converted;
    }
    parsed.values[std::string(f.dest)] = def;
  }
  if (mode != LaunchMode::Torchrun) return parsed;
  for (const auto& f : launchFlags()) {
    if (!(f.origin & kFromTorchrun)) continue;
    std::string dest(f.dest);
    const std::string upper = upperCase(dest);
    auto fromEnv = probes::lookup(env, "PET_" + upper);
    if (!fromEnv) continue;
    if (f.arity == FlagArity::Switch) {
      parsed.values[dest] = *fromEnv != "0" && !fromEnv->empty();
    } else if (auto v = convert(f, "PET_" + upper, *fromEnv)) {
      parsed.values[dest] = *v;
    }
    parsed.given.insert(dest);
    parsed.spelling[dest] = "PET_" + upper;
  }
  return parsed;
}

bool looksLikeNegativeNumber(const std::string& s) {
  return s.size() > 1 && s[0] == '-' &&
         (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
}

}  // namespace

std::string ParsedLaunchFlags::nameOf(const std::string& dest) const {
  auto it = spelling.find(dest);
  if (it != spelling.end()) return it->second;
  const FlagSpec* spec = findFlagSpec(dest);
  return spec ? std::string(spec->names.front()) : "--" + dest;
}

ParsedLaunchFlags defaultLaunchFlags(LaunchMode mode, const probes::Environment& env) {
  return defaultsOf(mode, env);
}

Expected<ParsedLaunchFlags> parseLaunchFlags(const std::vector<std::string>& args, LaunchMode mode,
                                             const probes::Environment& env) {
  ParsedLaunchFlags parsed = defaultsOf(mode, env);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      parsed.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (word.size() < 2 || word[0] != '-' || looksLikeNegativeNumber(word)) {
      parsed.command.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    }
    if (word == "-h" || word == "--help") {
      parsed.help = true;
      continue;
    }
    if (word.rfind("--help-", 0) == 0) {  // --help-all, --help-fsdp ... (launchHelp's topics)
      parsed.help = true;
      parsed.help_topic = word.substr(7);
      continue;
    }
    std::string name = word;
    std::optional<std::string> inlineValue;
    if (word.rfind("--", 0) == 0) {
      if (auto eq = word.find('='); eq != std::string::npos) {
        name = word.substr(0, eq);
        inlineValue = word.substr(eq + 1);
      }
    } else if (word.size() > 2) {  // -t3, -n=4
      name = word.substr(0, 2);
      inlineValue = word.substr(word[2] == '=' ? 3 : 2);
    }
    auto match = findFlag(name, mode);
    if (!match) return std::move(match).takeError();
    const FlagSpec& f = *match->spec;
    const std::string dest(f.dest);
    if (f.arity == FlagArity::Switch || f.arity == FlagArity::SwitchFalse) {
      if (inlineValue) return makeError(name + ": takes no value (got '" + *inlineValue + "')");
      parsed.values[dest] = f.arity == FlagArity::Switch;
    } else {
      if (!inlineValue) {
        if (i + 1 >= args.size() || (args[i + 1].rfind("-", 0) == 0 && args[i + 1].size() > 1 &&
                                     !looksLikeNegativeNumber(args[i + 1]))) {
          return makeError(name + ": expected a value");
        }
        inlineValue = args[++i];
      }
      auto value = convert(f, name, *inlineValue);
      if (!value) return std::move(value).takeError();
      if (f.arity == FlagArity::Append) {
        if (!parsed.values[dest].is_array()) parsed.values[dest] = json::array();
        parsed.values[dest].push_back(*value);
      } else {
        parsed.values[dest] = *value;
      }
    }
    parsed.given.insert(dest);
    parsed.spelling[dest] = name;
  }
  return parsed;
}
}  // namespace accel::launcher
