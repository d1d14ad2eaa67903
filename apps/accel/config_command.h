#pragma once
// `accel config [default|update|show]`: binds flags into ConfigCommandOptions; the work is in
// config/.

#include <CLI/CLI.hpp>

#include "config/effective_config.h"

namespace accel::apps {

struct ConfigCommandOptions {
  std::optional<std::string> config_file;  // for the questionnaire, default and update
  std::string mixed_precision = "no";      // config default --mixed_precision
  config::ConfigOverrides show;            // config show's flags
  bool show_json = false;
  CLI::App* command = nullptr;
  CLI::App* default_command = nullptr;
  CLI::App* update_command = nullptr;
  CLI::App* show_command = nullptr;
};

void registerConfigCommand(CLI::App& app, ConfigCommandOptions& options);

// Runs whichever of config / config default / update / show was parsed; returns the exit code.
int runConfigCommand(const ConfigCommandOptions& options);

}  // namespace accel::apps
