#pragma once
// `accel test [--config_file F] [--python P]`: accelerate's `accelerate test`, a short
// distributed sanity check of a config. It launches a small python3-torch script under
// `accel launch` with that config; each rank prints one line per check: torch importable, its
// environment (RANK, WORLD_SIZE, ... consistent), init_process_group (NCCL on GPUs, else Gloo),
// an all_reduce whose sum is checked, a barrier. Then, with the same config, libaccel's checks
// (accel-check, found beside the accel binary): its communicator, an all-reduce, a gather, a
// barrier. Then "Test is a success!" or what failed.

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace accel::apps {

struct TestCommandOptions {
  std::optional<std::string> config_file;  // else the default config file, as launch reads it
  std::optional<std::string> python;       // the interpreter (launch's --python)
  CLI::App* command = nullptr;
};

void registerTestCommand(CLI::App& app, TestCommandOptions& options);

// Blocks while the jobs run (as `accel launch`). Returns 0 when every rank passed every check,
// else the first failing launch's exit code (2 for a config or flag launch refuses, then nothing
// more runs; 1 when the script could not be written).
int runTestCommand(const TestCommandOptions& options);

}  // namespace accel::apps
