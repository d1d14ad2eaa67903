#pragma once
// The layout of a run's directory, torchrun's (1.13 and 2.x alike):
//   RUN_DIR/attempt_K/<local rank>/{stdout.log,stderr.log,error.json}
// where RUN_DIR is BASE/<run_id>_<random> (the agent makes it: --log_dir, or a temporary BASE).
// Every path of it is spelled here and nowhere else.

#include <string>

namespace accel::launcher {

// RUN_DIR/attempt_K/<local rank>: the directory of one worker of one attempt.
inline std::string rankDir(const std::string& runDir, int attempt, int localRank) {
  return runDir + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(localRank);
}

// The worker's TORCHELASTIC_ERROR_FILE.
inline std::string errorFile(const std::string& runDir, int attempt, int localRank) {
  return rankDir(runDir, attempt, localRank) + "/error.json";
}

// The log of stream 1 (stdout) or 2 (stderr) of a worker.
inline std::string logFile(const std::string& runDir, int attempt, int localRank, int stream) {
  return rankDir(runDir, attempt, localRank) + (stream == 1 ? "/stdout.log" : "/stderr.log");
}

// torchrun's --duplicate_{stdout,stderr}_filters file of an attempt, shared by its ranks.
inline std::string filteredLog(const std::string& runDir, int attempt, int stream) {
  return runDir + "/attempt_" + std::to_string(attempt) +
         (stream == 1 ? "/filtered_stdout.log" : "/filtered_stderr.log");
}

// For messages: where every attempt's logs are ("RUN_DIR/attempt_K/<local rank>/").
inline std::string logsPattern(const std::string& runDir) {
  return runDir + "/attempt_K/<local rank>/";
}

}  // namespace accel::launcher
