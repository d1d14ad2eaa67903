#pragma once
// `accel env [--json] [--config_file F]`: the diagnostics report (probes/env_report);
// `accel env --check`: the preflight doctor (probes/preflight).

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace accel::apps {

struct EnvCommandOptions {
  std::optional<std::string> config_file;
  bool json = false;
  bool check = false;
  std::optional<std::string> python;  // --check: the interpreter to check (launch's --python)
  CLI::App* command = nullptr;
};

void registerEnvCommand(CLI::App& app, EnvCommandOptions& options);

// Prints the report; returns 1 when the config file is invalid (the report says why), else 0.
// With --check: prints the preflight items; returns 1 when any FAILs, else 0.
int runEnvCommand(const EnvCommandOptions& options);

}  // namespace accel::apps
