#include "apps/accel/config_command.h"

#include <unistd.h>

#include <iostream>

#include "apps/accel/config_flags.h"
#include "apps/accel/messages.h"
#include "config/config_file.h"
#include "config/paths.h"
#include "config/questionnaire.h"
#include "probes/gpu_probe.h"

namespace accel::apps {
namespace {

using config::PathEnv;

// The file a writing command targets: --config_file, else the default location (whose
// directory is created). A custom path's directory must already exist, as in accelerate.
Expected<std::string> targetPath(const std::optional<std::string>& explicitPath,
                                 const PathEnv& env) {
  if (explicitPath) {
    std::string dir = config::parentDirectory(*explicitPath);
    if (::access(dir.c_str(), W_OK) != 0) {
      return makeError("--config_file: directory '" + dir + "' of '" + *explicitPath +
                       "' does not exist or is not writable");
    }
    return *explicitPath;
  }
  std::string path = config::defaultConfigPath(env);
  if (auto ok = config::makeDirectories(config::parentDirectory(path)); !ok) {
    return makeError("cannot write the config file '" + path + "': " + ok.error() +
                     " (set HF_HOME, or pass --config_file, to write it elsewhere)");
  }
  return path;
}

int fail(const std::string& message) {
  printError(message);
  return 1;
}

int runQuestionnaireCommand(const ConfigCommandOptions& o, const PathEnv& env) {
  auto path = targetPath(o.config_file, env);
  if (!path) return fail(path.error());
  auto answers = config::runQuestionnaire(std::cin, std::cout, env);
  if (!answers) return fail(answers.error());
  if (auto ok = config::saveConfig(*answers, *path); !ok) return fail(ok.error());
  std::cout << "accel configuration saved at " << *path << "\n";
  return 0;
}

int runDefault(const ConfigCommandOptions& o, const PathEnv& env) {
  auto path = targetPath(o.config_file, env);
  if (!path) return fail(path.error());
  if (::access(path->c_str(), F_OK) == 0) {
    std::cout
        << "Configuration already exists at " << *path
        << ", will not override. Run `accel config` manually or pass a different --config_file.\n";
    return 0;
  }
  // accelerate's write_basic_config: several GPUs → MULTI_GPU over all; one → NO; none → CPU.
  auto gpus = probes::probeGpus();
  int count = static_cast<int>(gpus.devices.size());
  if (config::precisionNeedsGpu(o.mixed_precision) && count == 0) {
    return fail("--mixed_precision: " + o.mixed_precision +
                " needs a GPU and none is usable here (" + gpus.cuda_status + ")");
  }
  config::ClusterConfig c;
  c.mixed_precision = o.mixed_precision;
  c.num_processes = count > 1 ? count : 1;
  c.distributed_type =
      std::string(count > 1 ? config::kDistributedMultiGpu : config::kDistributedNo);
  c.use_cpu = count == 0;
  c.same_network = true;
  if (count > 0) c.gpu_ids = "all";
  config::addAccelerateDefaults(c);
  if (auto ok = config::saveConfig(c, *path); !ok) return fail(ok.error());
  std::cout << "accel configuration saved at " << *path << "\n";
  return 0;
}

int runUpdate(const ConfigCommandOptions& o, const PathEnv& env) {
  std::string path = o.config_file.value_or(config::defaultConfigPath(env));
  if (::access(path.c_str(), F_OK) != 0) {
    return fail("no config file to update: '" + path +
                "' does not exist (run `accel config` first)");
  }
  auto loaded = config::loadConfig(path);
  if (!loaded) return fail(loaded.error());
  for (const auto& notice : config::dropObsoleteKeys(*loaded)) printInfo(path + ": " + notice);
  if (auto ok = config::saveConfig(*loaded, path); !ok) return fail(ok.error());
  std::cout << "Successfully updated the configuration file at " << path << ".\n";
  return 0;
}

int runShow(const ConfigCommandOptions& o, const PathEnv& env) {
  auto effective = config::resolveEffectiveConfig(o.show, env);
  if (!effective) return fail(effective.error());
  config::Document doc = effective->config.toDocument();
  if (o.show_json) {
    nlohmann::json sources;
    for (const auto& [key, source] : effective->sources) sources[key] = config::sourceName(source);
    nlohmann::json out = {{"config_file", effective->file ? nlohmann::json(*effective->file)
                                                          : nlohmann::json(nullptr)},
                          {"values", nlohmann::json(doc)},
                          {"sources", sources}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "# effective configuration (flag > file > default); file: "
            << effective->file.value_or("none") << "\n";
  std::string yaml = config::renderYaml(doc);
  // Annotate each top-level line with where its value came from.
  size_t start = 0;
  while (start < yaml.size()) {
    size_t end = yaml.find('\n', start);
    std::string line = yaml.substr(start, end - start);
    start = end == std::string::npos ? yaml.size() : end + 1;
    size_t colon = line.find(':');
    auto it = (!line.empty() && line[0] != ' ' && line[0] != '-' && colon != std::string::npos)
                  ? effective->sources.find(line.substr(0, colon))
                  : effective->sources.end();
    std::cout << line;
    if (it != effective->sources.end()) std::cout << "  # " << config::sourceName(it->second);
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void registerConfigCommand(CLI::App& app, ConfigCommandOptions& o) {
  o.command = app.add_subcommand("config", "Create or inspect accel's (accelerate's) config file");
  o.command->add_option("--config_file,--config-file", o.config_file,
                        "Where to write (default, as accelerate's: " +
                            config::defaultConfigPath(config::PathEnv::fromProcess()) + ")");
  o.command->require_subcommand(0, 1);

  o.default_command =
      o.command->add_subcommand("default", "Write a config for this machine without questions");
  o.default_command->add_option("--config_file,--config-file", o.config_file, "Where to write");
  o.default_command
      ->add_option("--mixed_precision,--mixed-precision", o.mixed_precision, "no, fp16 or bf16")
      ->check(CLI::IsMember({"no", "fp16", "bf16"}));

  o.update_command =
      o.command->add_subcommand("update", "Rewrite an existing config file with current keys");
  o.update_command->add_option("--config_file,--config-file", o.config_file, "The file to update");

  o.show_command = o.command->add_subcommand(
      "show", "Print the effective configuration (flag > file > default)");
  addConfigOverrideFlags(*o.show_command, o.show);
  o.show_command->add_flag("--json", o.show_json, "Print JSON");
}

int runConfigCommand(const ConfigCommandOptions& o) {
  const PathEnv env = PathEnv::fromProcess();
  if (o.default_command->parsed()) return runDefault(o, env);
  if (o.update_command->parsed()) return runUpdate(o, env);
  if (o.show_command->parsed()) return runShow(o, env);
  return runQuestionnaireCommand(o, env);
}

}  // namespace accel::apps
