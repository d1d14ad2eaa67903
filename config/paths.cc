#include "config/paths.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace accel::config {
namespace {

std::optional<std::string> getenvNonEmpty(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::string joinPath(const std::string& a, const std::string& b) {
  if (a.empty() || a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace

PathEnv PathEnv::fromProcess() {
  return PathEnv{getenvNonEmpty("HF_HOME"), getenvNonEmpty("XDG_CACHE_HOME"),
                 getenvNonEmpty("HOME")};
}

std::string expandUser(const std::string& path, const PathEnv& env) {
  if (!env.home || path.empty() || path[0] != '~') return path;
  if (path.size() == 1) return *env.home;
  if (path[1] == '/') return joinPath(*env.home, path.substr(2));
  return path;  // ~user is left as is
}

std::string defaultConfigPath(const PathEnv& env) {
  std::string hfHome =
      env.hf_home ? *env.hf_home : joinPath(env.xdg_cache_home.value_or("~/.cache"), "huggingface");
  return joinPath(expandUser(hfHome, env), "accelerate/default_config.yaml");
}

Expected<std::optional<std::string>> resolveConfigPath(
    const std::optional<std::string>& explicitPath, const PathEnv& env) {
  struct stat st {};
  if (explicitPath) {
    if (::stat(explicitPath->c_str(), &st) != 0) {
      return makeError("--config_file: '" + *explicitPath + "' does not exist");
    }
    if (S_ISDIR(st.st_mode))
      return makeError("--config_file: '" + *explicitPath + "' is a directory");
    return std::optional<std::string>(*explicitPath);
  }
  std::string path = defaultConfigPath(env);
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    return std::optional<std::string>(path);
  return std::optional<std::string>();
}

std::string parentDirectory(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Expected<void> makeDirectories(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return makeError("'" + dir + "' exists and is not a directory");
  }
  std::string parent = parentDirectory(dir);
  if (parent != dir && parent != "." && parent != "/") {
    if (auto ok = makeDirectories(parent); !ok) return ok;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return makeError("cannot create directory '" + dir + "': " + std::strerror(errno));
  }
  return {};
}

}  // namespace accel::config
