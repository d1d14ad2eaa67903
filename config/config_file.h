#pragma once
// Reading and writing config files: strict, position-aware loading of YAML (and JSON, which is
// YAML) and atomic writing in accelerate's format.

#include <set>
#include <string>

#include "config/cluster_config.h"
#include "libaccel/common/expected.h"

namespace accel::config {

// Reads and validates the config file at `path`. Errors name the file and, where the problem
// is in the text, its line and column ("f.yaml:3:1: unknown key 'num_procesess'; did you mean
// 'num_processes'?"). A missing file is an error naming the path. Never throws. When
// `keysInFile` is given it receives the keys the file set (after migrations).
Expected<ClusterConfig> loadConfig(const std::string& path,
                                   std::set<std::string>* keysInFile = nullptr);

// As loadConfig, from text already in memory; `name` is used in messages. Never throws, for
// any input (fuzzed in tests/fuzz).
Expected<ClusterConfig> parseConfig(const std::string& text, const std::string& name,
                                    std::set<std::string>* keysInFile = nullptr);

// The file contents accel writes: YAML with sorted keys, strings that YAML would misread
// (no, yes, on, 12, '') single-quoted, as accelerate's yaml.safe_dump does.
std::string renderYaml(const Document& doc);

// JSON with sorted keys, two-space indent and a trailing newline (accelerate's json writer).
std::string renderJson(const Document& doc);

// Writes `config.toFileDocument()` to `path`, as JSON if the name ends in ".json", else YAML.
// Atomic: a temp file in the same directory is written, flushed and renamed over `path`, so a
// failure leaves any old file intact. The parent directory must exist.
Expected<void> saveConfig(const ClusterConfig& config, const std::string& path);

// Replaces `path` with `contents` atomically (temp file + fsync + rename).
Expected<void> writeFileAtomically(const std::string& path, const std::string& contents);

}  // namespace accel::config
