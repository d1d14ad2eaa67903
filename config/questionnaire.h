#pragma once
// The `accel config` questionnaire: accelerate's (v1.14) questions for "This machine", in its
// order, with its defaults, writing its keys and spellings: NO, MULTI_CPU, MULTI_GPU, and the
// DeepSpeed, FSDP (with FSDP2's parallelism_config), Megatron-LM, fp8, torch dynamo and
// CPU-affinity sections. Menus keep accelerate's entries (so numbers match) and mark what accel
// does not support; such an entry is refused when chosen, before any further question. Nothing
// is asked that accel does not act on; the mpirun question is asked as accelerate asks it
// (multi-CPU), since accel launch runs mpirun for a hostfile.

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
