#pragma once
// Where accelerate (and so accel) keeps its config file.

#include <optional>
#include <string>

#include "libaccel/common/expected.h"

namespace accel::config {

// The environment variables the location depends on; a pure input so tests need not touch the
// process environment.
struct PathEnv {
  std::optional<std::string> hf_home;         // $HF_HOME
  std::optional<std::string> xdg_cache_home;  // $XDG_CACHE_HOME
  std::optional<std::string> home;            // $HOME

  // Reads the three variables from the process environment (empty values count as unset).
  static PathEnv fromProcess();
};

// accelerate's default: $HF_HOME/accelerate/default_config.yaml, else
// ${XDG_CACHE_HOME:-~/.cache}/huggingface/accelerate/default_config.yaml; `~` expanded.
std::string defaultConfigPath(const PathEnv& env);

// `~` or `~/x` expanded with $HOME; other paths unchanged.
std::string expandUser(const std::string& path, const PathEnv& env);

// Which file a command reads: the explicit --config_file (which must exist, else an error
// naming it), or the default path if that file exists, or nullopt when there is none.
Expected<std::optional<std::string>> resolveConfigPath(
    const std::optional<std::string>& explicitPath, const PathEnv& env);

// Creates `dir` and its parents (mode 0755) if missing.
Expected<void> makeDirectories(const std::string& dir);

// The directory part of `path` ("." for a bare name).
std::string parentDirectory(const std::string& path);

}  // namespace accel::config
