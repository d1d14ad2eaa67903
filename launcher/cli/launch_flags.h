#pragma once
// Every flag `accel launch` and `accel run` take, in one table: accelerate launch's (newest 1.x
// plus the older spellings still in use), torchrun's, and accel's own — with what each does here.
// The parser follows argparse, which both accelerate and torchrun use: `--flag value` and
// `--flag=value`, the dash and underscore spellings of every long name, unique prefixes
// ("--num_proc"), and the first positional argument ends the flags: it and everything after it
// are the training command, untouched. Values are converted the way accelerate's parser converts
// them (int(), float(), str_to_bool, bool(str)...), so the worker environment built from them
// prints exactly what accelerate's would (see accelerate_env.h).

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/plan/launch_options.h"
#include "libaccel/common/expected.h"
#include "probes/environment.h"

namespace accel::launcher {

// Where a flag comes from (a flag may be in several).
enum FlagOrigin : unsigned { kFromAccelerate = 1, kFromTorchrun = 2, kFromAccel = 4 };

enum class FlagArity {
  Switch,       // store_true: no value
  SwitchFalse,  // store_false (accelerate's --no_tpu_cluster)
  Value,        // one value
  Append,       // one value per use, collected in a list (accelerate's --vm, --env)
};

// How the text of a value becomes a value, as in the Python parser that defines the flag.
enum class FlagType {
  Str,
  Int,        // int(): optional sign, digits (underscores between digits allowed)
  Float,      // float(): decimal or exponent notation, inf, nan
  StrToBool,  // accelerate's str_to_bool: yes/no, true/false, on/off, y/n, t/f, 1/0 → 1 or 0
  PyBool,  // argparse's type=bool: bool(text), so any non-empty text is True (accelerate's Megatron
           // flags)
  BoolTuple,  // "true,false,false" → a list of str_to_bool values (--fp8_override_linear_precision)
};

// What accel does with the flag.
enum class FlagUse {
  Launch,     // shapes the job: sizes, addresses, restarts, logs, the command
  WorkerEnv,  // becomes worker environment the way accelerate builds it
  Notice,     // accepted and ignored, with one line saying why (only when given)
  Refuse,     // names a job accel cannot run (TPU): an error naming the flag and why
};

struct FlagSpec {
  std::vector<std::string_view> names;  // canonical first; dash spellings of long names are implied
  std::string_view dest;                // the name in the parsed namespace (accelerate's dest)
  FlagArity arity = FlagArity::Value;
  FlagType type = FlagType::Str;
  std::string_view default_json =
      "null";  // the parser's default, as JSON (a string default is converted by `type`)
  std::vector<std::string_view>
      choices;  // allowed values after conversion (text form); empty = any
  unsigned origin = kFromAccelerate;
  FlagUse use = FlagUse::Launch;
  std::string_view help;
  std::string_view why = {};  // Notice/Refuse: the reason, printed after the flag's name
};

// The table, in help order.
const std::vector<FlagSpec>& launchFlags();

// Whether the flag exists in `mode` (accel run takes torchrun's and accel's own flags only).
bool allowedIn(const FlagSpec& f, LaunchMode mode);

// The first row whose dest is `dest`, or nullptr.
const FlagSpec* findFlagSpec(std::string_view dest);

// The flags of a launch as parsed: every dest of the table with its value (defaults included),
// which were given, and how each was spelled (for messages).
struct ParsedLaunchFlags {
  LaunchMode mode = LaunchMode::Accelerate;
  std::map<std::string, nlohmann::json> values;
  std::set<std::string> given;
  std::map<std::string, std::string> spelling;  // dest → the spelling used on the command line
  std::vector<std::string> command;             // the training command and its arguments
  bool help = false;                            // -h/--help was given
  std::string help_topic;                       // --help-all, --help-fsdp ...: "all", "fsdp"

  bool isGiven(const std::string& dest) const { return given.count(dest) != 0; }
  // The flag as the user wrote it ("--nproc-per-node"), else its canonical name.
  std::string nameOf(const std::string& dest) const;
};

// The namespace before any flag: every dest's default (string defaults converted by the flag's
// type, as argparse does); in Torchrun mode PET_<DEST> variables of `env` give torchrun's flags.
ParsedLaunchFlags defaultLaunchFlags(LaunchMode mode, const probes::Environment& env = {});

// Parses `args` (everything after `accel launch`). Errors name the flag and the value
// ("--num_processes: 'x' is not an integer", "--num: ambiguous (--num_processes,
// --num_machines, ...)", "unknown flag --frob"). `env` supplies PET_* defaults in Torchrun mode.
Expected<ParsedLaunchFlags> parseLaunchFlags(const std::vector<std::string>& args, LaunchMode mode,
                                             const probes::Environment& env);

// The help text of `accel launch` / `accel run`, in accelerate's groups (hardware, resources,
// training paradigm, distributed, torchrun, accel's own; dynamo, DeepSpeed, FSDP, Megatron-LM,
// fp8, parallelism, TPU/AWS), one line per flag. `topic` "" is the short help: the groups most
// jobs use in full, the others as one line each naming `--help-<group>`; "all" every group; a
// group's key that group. Returns nullopt for an unknown topic.
std::optional<std::string> launchHelp(LaunchMode mode, const std::string& topic = "");
// The topics launchHelp takes besides "": "all" and each group's key.
std::vector<std::string> launchHelpTopics();

// The table as Markdown (flag, where it comes from, what accel does): README.md's flag table,
// which tests/launcher/cli/launch_flags_test.cc keeps equal to it.
std::string launchFlagsMarkdown();

}  // namespace accel::launcher
