#pragma once
// `accel status [--json]`: the running jobs of this user on this machine, rank by rank
// (launcher/supervise/status_socket.h).

#include <CLI/CLI.hpp>

namespace accel::apps {

struct StatusCommandOptions {
  bool json = false;
  CLI::App* command = nullptr;
};

void registerStatusCommand(CLI::App& app, StatusCommandOptions& options);

// Prints every live agent's answer; 0, or 1 when an agent did not answer.
int runStatusCommand(const StatusCommandOptions& options);

}  // namespace accel::apps
