// accel: a native replacement for `accelerate config / env / launch`.
// Wires the subcommands; each lives in its own file and only main turns errors into exit codes.

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "accel_build_info.h"
#include "apps/accel/config_command.h"
#include "apps/accel/env_command.h"
#include "apps/accel/launch_command.h"
#include "apps/accel/status_command.h"
#include "apps/accel/test_command.h"
#include "config/schema.h"

namespace {

// A link named torchrun (or torchrun-accel) is torchrun's drop-in: `accel run` with its argv.
bool calledAsTorchrun(const char* argv0) {
  std::string name = argv0;
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return name.rfind("torchrun", 0) == 0;
}

// Usage errors in accel's voice ("accel: error: accel env: ..."), exit 2; --help and --version
// print as CLI11 does. Unexpected arguments are listed as typed (CLI11 lists them reversed).
int reportParseError(CLI::App& app, const CLI::ParseError& e, const char* first) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands()) sub = s;
  const std::string where = sub ? "accel " + sub->get_name() : "accel";
  // "accel: error: " is the prefix; a subcommand's errors name it after that, accel's own don't.
  std::string context = sub ? where + ": " : "";
  std::string message = e.what();
  if (!sub && first && first[0] != '-') {
    std::string commands, closest;
    size_t best = 3;  // a typo or two: `accel lauch`
    for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + s->get_name();
      const size_t d = accel::config::editDistance(first, s->get_name());
      if (d < best) best = d, closest = s->get_name();
    }
    message = std::string("unknown command '") + first + "' (" +
              (closest.empty() ? "" : "did you mean '" + closest + "'? ") +
              "commands: " + commands + ")";
  }
  if (sub && dynamic_cast<const CLI::ExtrasError*>(&e)) {
    std::string extras;
    for (const auto& a : sub->remaining()) extras += (extras.empty() ? "" : " ") + a;
    message = "unexpected argument(s): " + extras;
    if (sub->get_name() == "env" && extras.rfind("--", 0) == 0) {
      message +=
          " (accel env --check checks the config file, --config_file, not launch flags: put "
          "them in a config file, or see what launch would do with accel launch --dry_run)";
    }
  }
  std::cerr << "accel: error: " << context << message << "\nRun '" << where
            << " --help' for more information.\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0 && calledAsTorchrun(argv[0])) {
    return accel::apps::runLaunchArgs(std::vector<std::string>(argv + 1, argv + argc),
                                      accel::launcher::LaunchMode::Torchrun);
  }

  CLI::App app{"accel: configure, inspect and launch distributed training (accelerate-compatible)",
               "accel"};
  app.set_version_flag("--version", ACCEL_VERSION);
  app.require_subcommand(1);

  accel::apps::ConfigCommandOptions configOptions;
  accel::apps::EnvCommandOptions envOptions;
  accel::apps::LaunchCommandOptions launchOptions;
  accel::apps::StatusCommandOptions statusOptions;
  accel::apps::TestCommandOptions testOptions;
  accel::apps::registerConfigCommand(app, configOptions);
  accel::apps::registerEnvCommand(app, envOptions);
  accel::apps::registerLaunchCommand(app, launchOptions);
  accel::apps::registerStatusCommand(app, statusOptions);
  accel::apps::registerTestCommand(app, testOptions);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return reportParseError(
        app, e, argc > 1 ? argv[1] : nullptr);  // usage errors exit 2, like other Unix tools
  }

  if (configOptions.command->parsed()) return accel::apps::runConfigCommand(configOptions);
  if (envOptions.command->parsed()) return accel::apps::runEnvCommand(envOptions);
  if (launchOptions.command->parsed())
    return accel::apps::runLaunchCommand(launchOptions, accel::launcher::LaunchMode::Accelerate);
  if (statusOptions.command->parsed()) return accel::apps::runStatusCommand(statusOptions);
  if (testOptions.command->parsed()) return accel::apps::runTestCommand(testOptions);
  if (launchOptions.run_command->parsed())
    return accel::apps::runLaunchCommand(launchOptions, accel::launcher::LaunchMode::Torchrun);
  return 2;
}
