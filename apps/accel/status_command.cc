#include "apps/accel/status_command.h"

#include <iostream>

#include "launcher/supervise/status_socket.h"

namespace accel::apps {

void registerStatusCommand(CLI::App& app, StatusCommandOptions& o) {
  o.command = app.add_subcommand(
      "status", "Show the running jobs of this user on this machine, rank by rank");
  o.command->add_flag("--json", o.json, "Print JSON: {\"jobs\": [...], \"problems\": [...]}");
}

int runStatusCommand(const StatusCommandOptions& o) {
  std::vector<std::string> problems;
  const auto agents = launcher::queryAgents(problems);
  if (o.json) {
    std::cout << nlohmann::json{{"jobs", agents}, {"problems", problems}}.dump(2) << "\n";
  } else {
    std::cout << launcher::renderStatusText(agents);
    for (const auto& p : problems) std::cerr << "accel status: " << p << "\n";
  }
  return problems.empty() ? 0 : 1;
}

}  // namespace accel::apps
