#pragma once
// `accel launch [flags] SCRIPT.py|BINARY [args...]` and `accel run` (torchrun's drop-in): the
// flags are parsed by launcher/cli/launch_flags.h; the work is in launcher/launch.h.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "launcher/cli/options_from_flags.h"

namespace accel::apps {

struct LaunchCommandOptions {
  CLI::App* command = nullptr;      // accel launch
  CLI::App* run_command = nullptr;  // accel run
};

void registerLaunchCommand(CLI::App& app, LaunchCommandOptions& options);

// Runs the job of the parsed subcommand; returns its exit code (2 when nothing could be started).
int runLaunchCommand(LaunchCommandOptions& options, launcher::LaunchMode mode);

// The same for a command line already split off (a binary named torchrun: argv[1..]).
int runLaunchArgs(const std::vector<std::string>& args, launcher::LaunchMode mode);

}  // namespace accel::apps
