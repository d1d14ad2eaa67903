#pragma once
// launch: the whole of `accel launch` on one machine — plan, port, supervise every attempt,
// summarise. apps/accel only binds flags into LaunchOptions and calls this.

#include "launcher/plan/launch_options.h"
#include "launcher/report/job_report.h"
#include "libaccel/common/expected.h"

namespace accel::launcher {

// Runs the job to its end. An error means nothing was spawned (bad flag, script, config or
// port): the caller exits 2. Otherwise the report's exit_code is the job's: 0 when every
// worker succeeded, the culprit's code (128+N for signal N) after a failure, 128+N when the
// agent was stopped by signal N. Blocking.
Expected<JobReport> launch(const LaunchOptions& options);

}  // namespace accel::launcher
