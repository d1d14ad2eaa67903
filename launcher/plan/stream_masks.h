#pragma once
// torchrun's --redirects and --tee values: which of a worker's streams go to its log files.
// A mask is 0 (none), 1 (stdout), 2 (stderr) or 3 (both); a value is one mask for every local
// rank ("3") or a map by local rank ("0:3,1:1": the ranks not named get 0).

#include <string>
#include <string_view>
#include <vector>

#include "libaccel/common/expected.h"

namespace accel::launcher {

constexpr int kStdoutMask = 1;
constexpr int kStderrMask = 2;

// The mask of each local rank 0..localWorldSize-1, or an error naming `flag`, the bad item and
// why (not 0-3, a local rank out of range or given twice, not N or RANK:N). torchrun's own
// parser also takes only these forms, except that it allows one digit per local rank. Pure.
Expected<std::vector<int>> parseStreamMasks(std::string_view flag, std::string_view text,
                                            int localWorldSize);

}  // namespace accel::launcher
