#pragma once
// launchOptionsFrom: the command line of `accel launch` / `accel run`, parsed by launch_flags.h,
// as the planner's input (launcher/plan/launch_options.h).

#include "launcher/cli/launch_flags.h"
#include "launcher/plan/launch_options.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// The options of a parsed command line: accelerate's and torchrun's spellings of one setting
// merged (contradicting values are an error naming both flags), refused flags (TPU) an error
// naming the flag and why, ignored ones a notice each. Does not read the config file.
Expected<LaunchOptions> launchOptionsFrom(ParsedLaunchFlags flags);

}  // namespace accel::launcher
