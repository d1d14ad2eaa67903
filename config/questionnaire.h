#pragma once
// The `accel config` questionnaire: accelerate's questions for "This machine", in its order,
// with its defaults, for the distributed types accel runs (NO, MULTI_CPU, MULTI_GPU).

#include <istream>
#include <ostream>

#include "config/cluster_config.h"
#include "config/paths.h"
#include "libaccel/common/expected.h"

namespace accel::config {

// Asks every question on `out`, reads the answers from `in`, and returns the resulting config
// (no file is written). Invalid answers are re-asked with the reason; end of input before the
// last answer is an error naming the question. Blocks on `in`; never throws.
Expected<ClusterConfig> runQuestionnaire(std::istream& in, std::ostream& out, const PathEnv& env);

}  // namespace accel::config
