#pragma once
// `accel launch [flags] SCRIPT.py|BINARY [args...]`: binds accelerate's launch flags (both
// spellings) into LaunchOptions; the work is in launcher/launch.

#include <CLI/CLI.hpp>

#include "launcher/launch_options.h"

namespace accel::apps {

struct LaunchCommandOptions {
  launcher::LaunchOptions launch;
  double term_timeout_s = 5.0;
  CLI::App* command = nullptr;
};

void registerLaunchCommand(CLI::App& app, LaunchCommandOptions& options);

// Runs the job; returns its exit code (2 when nothing could be started).
int runLaunchCommand(LaunchCommandOptions& options);

}  // namespace accel::apps
