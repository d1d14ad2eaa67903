#include "apps/accel/env_command.h"

#include <iostream>

#include "accel_build_info.h"
#include "accel_git_revision.h"
#include "probes/env_report.h"

namespace accel::apps {
namespace {

std::string compilerName() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

void registerEnvCommand(CLI::App& app, EnvCommandOptions& o) {
  o.command = app.add_subcommand("env", "Print versions, hardware and the config in use (for bug reports)");
  o.command->add_option("--config_file,--config-file", o.config_file, "Config file to report instead of the default");
  o.command->add_flag("--json", o.json, "Print JSON");
}

int runEnvCommand(const EnvCommandOptions& o) {
  probes::BuildInfo build{ACCEL_VERSION, ACCEL_GIT_REVISION, compilerName(), ACCEL_BUILD_TYPE, ACCEL_TORCH_VERSION,
                            ACCEL_WITH_NCCL_BUILT != 0};
  auto report = probes::collectEnvReport(build, o.config_file, config::PathEnv::fromProcess());
  if (o.json) {
    std::cout << probes::renderEnvJson(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << probes::renderEnvText(report);
  }
  return report.config.error.empty() ? 0 : 1;
}

}  // namespace accel::apps
