#include "apps/accel/launch_command.h"

#include <cstdio>

#include "apps/accel/messages.h"
#include "launcher/launch.h"
#include "probes/environment.h"

namespace accel::apps {

void registerLaunchCommand(CLI::App& app, LaunchCommandOptions& o) {
  // The flags are accelerate's and torchrun's, parsed by launcher/cli/launch_flags.h (argparse's
  // rules: prefixes, dash spellings, --flag=value), so CLI11 passes everything after the subcommand
  // on.
  auto addRaw = [&app](const char* name, const char* description) {
    CLI::App* command = app.add_subcommand(name, description);
    command->prefix_command();
    command->set_help_flag();
    command->allow_extras();
    return command;
  };
  o.command = addRaw("launch",
                     "Launch a training script on N processes (accelerate's and torchrun's flags; "
                     "--help lists them)");
  o.run_command = addRaw(
      "run",
      "torchrun's drop-in: its flags and defaults, no accelerate config (--help lists them)");
}

int runLaunchCommand(LaunchCommandOptions& o, launcher::LaunchMode mode) {
  CLI::App* command = mode == launcher::LaunchMode::Torchrun ? o.run_command : o.command;
  return runLaunchArgs(command->remaining(), mode);
}

int runLaunchArgs(const std::vector<std::string>& args, launcher::LaunchMode mode) {
  auto parsed = launcher::parseLaunchFlags(args, mode, probes::processEnvironment());
  if (!parsed) {
    printError(parsed.error());
    return 2;
  }
  if (parsed->help) {
    const auto text = launcher::launchHelp(mode, parsed->help_topic);
    if (!text) {
      std::string topics;
      for (const auto& t : launcher::launchHelpTopics()) topics += (topics.empty() ? "" : ", ") + t;
      printError("--help-" + parsed->help_topic + ": no such help; there are --help-{" + topics +
                 "}");
      return 2;
    }
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  auto options = launcher::launchOptionsFrom(std::move(*parsed));
  if (!options) {
    printError(options.error());
    return 2;
  }
  auto report = launcher::launch(*options);
  if (!report) {
    printError(report.error());
    return 2;
  }
  return report->exit_code;
}

}  // namespace accel::apps
