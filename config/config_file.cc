#include "config/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace accel::config {
namespace {

using nlohmann::json;

std::string where(const std::string& name, const YAML::Mark& mark) {
  if (mark.is_null()) return name + ": ";
  return name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}

bool isPlain(const YAML::Node& node) { return node.Tag() != "!"; }

std::optional<bool> parseYamlBool(const std::string& s) {
  static const char* const kTrue[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
  static const char* const kFalse[] = {"false", "False", "FALSE", "no", "No",
                                       "NO",    "off",   "Off",   "OFF"};
  for (const char* t : kTrue)
    if (s == t) return true;
  for (const char* f : kFalse)
    if (f == s) return false;
  return std::nullopt;
}

bool isYamlNull(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<long long> parseYamlInt(const std::string& s) {
  static const std::regex kInt("[-+]?(0|[1-9][0-9_]*)");
  if (!std::regex_match(s, kInt)) return std::nullopt;
  std::string digits;
  for (char c : s)
    if (c != '_' && c != '+') digits += c;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') return std::nullopt;
  return v;
}

std::optional<double> parseYamlFloat(const std::string& s) {
  static const std::regex kFloat(
      "[-+]?([0-9][0-9_]*)?\\.[0-9_]*([eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+");
  if (!std::regex_match(s, kFloat) || s == ".") return std::nullopt;
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  const double value = std::strtod(digits.c_str(), nullptr);
  // Past a double's range (220e82950) PyYAML gives inf, which JSON cannot hold and a rewritten
  // file would not read back: such a scalar stays its text.
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

// A scalar as the value PyYAML would give it: plain scalars are typed by their text, quoted
// ones are strings.
json scalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (!isPlain(node)) return s;
  if (isYamlNull(s)) return nullptr;
  if (auto b = parseYamlBool(s)) return *b;
  if (auto i = parseYamlInt(s)) return *i;
  if (auto f = parseYamlFloat(s)) return *f;
  return s;
}

json nodeToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return scalarToJson(node);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(nodeToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.Scalar()] = nodeToJson(kv.second);
      return out;
    }
    default:
      return nullptr;
  }
}

const char* describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    default:
      return "a scalar";
  }
}

// Checks one top-level value against its spec; returns the value as JSON, or an error that
// names the position and what was expected.
Expected<json> convertValue(const FieldSpec& spec, const YAML::Node& value,
                            const std::string& name) {
  const std::string at = where(name, value.Mark());
  const std::string key = std::string(spec.name);
  if (value.IsNull() || (value.IsScalar() && isPlain(value) && isYamlNull(value.Scalar()))) {
    return json(nullptr);
  }
  switch (spec.kind) {
    case Kind::Bool: {
      std::optional<bool> b;
      if (value.IsScalar() && isPlain(value)) b = parseYamlBool(value.Scalar());
      if (!b) {
        std::string got = value.IsScalar() ? "'" + value.Scalar() + "'" : describe(value);
        return makeError(at + "'" + key + "' must be true or false, not " + got);
      }
      return json(*b);
    }
    case Kind::Int: {
      std::optional<long long> i;
      if (value.IsScalar() && isPlain(value)) i = parseYamlInt(value.Scalar());
      if (!i) {
        std::string got = value.IsScalar() ? "'" + value.Scalar() + "'" : describe(value);
        return makeError(at + "'" + key + "' must be an integer, not " + got);
      }
      // A negative minimum means "-1 = unset, otherwise positive" (num_processes).
      bool inRange = *i >= spec.min && *i <= spec.max && !(spec.min < 0 && *i == 0);
      if (!inRange) {
        std::string range = spec.min < 0
                                ? "1.." + std::to_string(spec.max) + " (or -1 for unset)"
                                : std::to_string(spec.min) + ".." + std::to_string(spec.max);
        return makeError(at + "'" + key + "' is " + std::to_string(*i) + ", out of range " + range);
      }
      return json(*i);
    }
    case Kind::String: {
      if (!value.IsScalar())
        return makeError(at + "'" + key + "' must be a string, not " + describe(value));
      const std::string& s = value.Scalar();
      if (!spec.choices.empty()) {
        bool ok = false;
        for (auto c : spec.choices) ok = ok || c == s;
        if (!ok) {
          return makeError(at + "'" + key + "' is '" + s + "', must be one of " +
                           joinChoices(spec.choices));
        }
      }
      return json(s);
    }
    case Kind::StringList: {
      if (!value.IsSequence())
        return makeError(at + "'" + key + "' must be a list, not " + describe(value));
      json out = json::array();
      for (const auto& item : value) {
        if (!item.IsScalar()) {
          return makeError(where(name, item.Mark()) + "items of '" + key +
                           "' must be strings, not " + describe(item));
        }
        out.push_back(item.Scalar());
      }
      return out;
    }
    case Kind::Mapping:
      if (!value.IsMap())
        return makeError(at + "'" + key + "' must be a mapping, not " + describe(value));
      return nodeToJson(value);
    case Kind::BoolOrString: {
      if (!value.IsScalar())
        return makeError(at + "'" + key + "' must be a string or boolean, not " + describe(value));
      if (isPlain(value)) {
        if (auto b = parseYamlBool(value.Scalar())) return json(*b);
      }
      return json(value.Scalar());
    }
  }
  return json(nullptr);
}

// Cross-key checks that a single value cannot make.
Expected<void> checkConsistency(const ClusterConfig& c,
                                const std::map<std::string, YAML::Mark>& marks,
                                const std::string& name) {
  auto at = [&](const char* key) {
    auto it = marks.find(key);
    return where(name, it == marks.end() ? YAML::Mark::null_mark() : it->second);
  };
  if (c.machine_rank >= c.num_machines) {
    return makeError(at("machine_rank") + "'machine_rank' is " + std::to_string(c.machine_rank) +
                     " but 'num_machines' is " + std::to_string(c.num_machines) +
                     "; machine_rank must be below num_machines");
  }
  if (c.num_processes > 0 && c.num_processes < c.num_machines) {
    return makeError(at("num_processes") + "'num_processes' is " + std::to_string(c.num_processes) +
                     ", fewer than 'num_machines' (" + std::to_string(c.num_machines) +
                     "); num_processes is the total over all machines");
  }
  if (c.gpu_ids) {
    if (auto problem = checkGpuIds(*c.gpu_ids))
      return makeError(at("gpu_ids") + "'gpu_ids' is " + *problem);
  }
  if (c.compute_environment != kLocalMachine) {
    return makeError(at("compute_environment") + "compute_environment '" + c.compute_environment +
                     "' is not supported by accel (only LOCAL_MACHINE)");
  }
  return {};
}

std::string formatDouble(double d) {
  if (std::isnan(d)) return ".nan";
  if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// Whether a string must be quoted so that YAML (1.1, as PyYAML reads it) gives it back as
// the same string.
bool needsQuotes(const std::string& s) {
  if (s.empty() || isYamlNull(s) || parseYamlBool(s) || parseYamlInt(s) || parseYamlFloat(s))
    return true;
  static const std::string kIndicators = "-?:,[]{}#&*!|>'\"%@`";
  if (kIndicators.find(s.front()) != std::string::npos) return true;
  if (s.front() == ' ' || s.back() == ' ') return true;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return true;
  if (s.back() == ':') return true;
  static const std::regex kOther(
      "[yYnN]|\\.(inf|Inf|INF|nan|NaN|NAN)|[-+]\\.(inf|Inf|INF)|0[xo][0-9a-fA-F]+");
  if (std::regex_match(s, kOther)) return true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

void emit(YAML::Emitter& out, const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      out << YAML::Null;
      break;
    case json::value_t::boolean:
      out << (value.get<bool>() ? "true" : "false");
      break;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      out << value.dump();
      break;
    case json::value_t::number_float:
      out << formatDouble(value.get<double>());
      break;
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (needsQuotes(s)) out << YAML::SingleQuoted;
      out << s;
      break;
    }
    case json::value_t::array:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::BeginSeq;
      for (const auto& item : value) emit(out, item);
      out << YAML::EndSeq;
      break;
    case json::value_t::object:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      for (const auto& [k, v] : value.items()) {
        out << YAML::Key;
        if (needsQuotes(k)) out << YAML::SingleQuoted;
        out << k << YAML::Value;
        emit(out, v);
      }
      out << YAML::EndMap;
      break;
    default:
      out << YAML::Null;
      break;
  }
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string hexByte(char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned char>(c));
  return buf;
}

bool isControl(unsigned char c) {
  return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
}

// Whether any string in `value` (keys included) holds a control character, which YAML escapes
// could smuggle in and no config value needs.
// YAML's limit for a key, 1024 characters as written, its JSON quotes included: a longer one
// could not be read back from the JSON accel writes (found by tests/fuzz/config_fuzzer: a key of
// hundreds of backslashes, each written as two).
constexpr size_t kMaxKeyLength = 1022;

bool hasOverlongKey(const json& value) {
  if (value.is_array()) return std::any_of(value.begin(), value.end(), hasOverlongKey);
  if (!value.is_object()) return false;
  for (const auto& [k, v] : value.items()) {
    // As written: JSON escapes double some characters ('\\' is two).
    if (json(k).dump().size() - 2 > kMaxKeyLength || hasOverlongKey(v)) return true;
  }
  return false;
}

size_t firstInvalidByte(const std::string& text);

// A control character or bytes that are not UTF-8 in any string or key of `value`: the file's
// bytes are checked before parsing, but YAML's escapes ("\x0c", "\_" — a lone 0xA0 byte) decode
// into such bytes after it (the fuzzer found one; JSON output would then throw).
bool containsControl(const json& value) {
  auto text = [](const std::string& s) { return firstInvalidByte(s) != std::string::npos; };
  if (value.is_string()) return text(value.get_ref<const std::string&>());
  if (value.is_array()) return std::any_of(value.begin(), value.end(), containsControl);
  if (value.is_object()) {
    for (const auto& [k, v] : value.items()) {
      if (text(k) || containsControl(v)) return true;
    }
  }
  return false;
}

// The byte offset of the first invalid UTF-8 sequence or control character in `text`, or npos.
size_t firstInvalidByte(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (isControl(c)) return i;
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > text.size()) return i;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

}  // namespace

Expected<ClusterConfig> parseConfig(const std::string& text, const std::string& name,
                                    std::set<std::string>* keysInFile) {
  if (size_t bad = firstInvalidByte(text); bad != std::string::npos) {
    size_t line = 1 + static_cast<size_t>(
                          std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n'));
    size_t lineStart = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    size_t column = bad == 0 || lineStart == std::string::npos ? bad + 1 : bad - lineStart;
    return makeError(
        name + ":" + std::to_string(line) + ":" + std::to_string(column) +
        (isControl(static_cast<unsigned char>(text[bad]))
             ? ": control character " + hexByte(text[bad]) + " is not allowed in a config file"
             : ": invalid UTF-8; config files must be UTF-8 text"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return makeError(where(name, e.mark) + "invalid YAML: " + e.msg);
  } catch (const std::exception& e) {
    return makeError(name + ": invalid YAML: " + e.what());
  }
  if (root.IsNull())
    return makeError(name + ": the file is empty; expected a mapping of config keys");
  if (!root.IsMap()) {
    return makeError(where(name, root.Mark()) +
                     "expected a mapping of config keys at the top level, not " + describe(root));
  }

  Document doc;
  std::map<std::string, YAML::Mark> marks;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) {
      return makeError(where(name, kv.first.Mark()) + "config keys must be plain names, not " +
                       describe(kv.first));
    }
    const std::string key = kv.first.Scalar();
    const FieldSpec* spec = findField(key);
    if (!spec) {
      std::string msg = where(name, kv.first.Mark()) + "unknown key '" + key + "'";
      if (auto s = suggestKey(key)) msg += "; did you mean '" + std::string(*s) + "'?";
      return makeError(msg);
    }
    if (marks.count(key))
      return makeError(where(name, kv.first.Mark()) + "duplicate key '" + key + "'");
    marks[key] = kv.first.Mark();
    auto value = convertValue(*spec, kv.second, name);
    if (!value) return std::move(value).takeError();
    if (containsControl(*value)) {
      return makeError(where(name, kv.second.Mark()) + "'" + key +
                       "' contains a control character or text that is not UTF-8");
    }
    if (hasOverlongKey(*value)) {
      return makeError(where(name, kv.second.Mark()) + "'" + key + "' has a key longer than " +
                       std::to_string(kMaxKeyLength) + " characters");
    }
    if (!value->is_null()) doc[key] = std::move(*value);
  }

  migrateDocument(doc);
  if (!doc.count("distributed_type")) {
    return makeError(name +
                     ": 'distributed_type' must be specified (one of NO, MULTI_CPU, MULTI_GPU)");
  }
  ClusterConfig config = ClusterConfig::fromDocument(doc);
  if (auto ok = checkConsistency(config, marks, name); !ok) return std::move(ok).takeError();
  if (keysInFile) {
    keysInFile->clear();
    for (const auto& entry : doc) keysInFile->insert(entry.first);
  }
  return config;
}

Expected<ClusterConfig> loadConfig(const std::string& path, std::set<std::string>* keysInFile) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return makeError("config file '" + path + "' does not exist" +
                     (errno == ENOENT ? "" : std::string(" (") + std::strerror(errno) + ")"));
  }
  if (S_ISDIR(st.st_mode)) return makeError("config file '" + path + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError("cannot read config file '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parseConfig(text.str(), path, keysInFile);
}

std::string renderYaml(const Document& doc) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [key, value] : doc) {
    out << YAML::Key << key << YAML::Value;
    emit(out, value);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string renderJson(const Document& doc) {
  json object(doc);
  return object.dump(2) + "\n";
}

Expected<void> writeFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return makeError("cannot write '" + path + "': " + std::strerror(errno));
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      return makeError("cannot write '" + path + "': " + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return makeError("cannot write '" + path + "': " + std::strerror(err));
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return makeError("cannot replace '" + path + "': " + std::strerror(err));
  }
  return {};
}

Expected<void> saveConfig(const ClusterConfig& config, const std::string& path) {
  Document doc = config.toFileDocument();
  return writeFileAtomically(path, endsWith(path, ".json") ? renderJson(doc) : renderYaml(doc));
}

}  // namespace accel::config
