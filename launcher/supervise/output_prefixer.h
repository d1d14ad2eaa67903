#pragma once
// OutputPrefixer: turns a worker's byte stream into whole lines, each prefixed with its rank,
// so lines from different ranks never interleave mid-line on the console.

#include <string>
#include <string_view>

namespace accel::launcher {

class OutputPrefixer {
 public:
  // Longest line kept whole; longer runs are cut and emitted in pieces.
  static constexpr size_t kMaxLine = 64 * 1024;

  // With `mpiTags`, the stream is mpirun's with its rank tags ("[1,3]<stdout>:" from Open MPI's
  // --tag-output, "[3] " from MPICH's -prepend-rank): each piece is labelled "[rank 3] " from its
  // tag instead of `prefix`; untagged pieces are mpirun's own, labelled "[mpirun] ".
  explicit OutputPrefixer(std::string prefix, bool mpiTags = false)
      : prefix_(std::move(prefix)), mpi_tags_(mpiTags) {}

  // Appends `data` and returns the complete lines it finished, each prefixed and ending in '\n'.
  // A '\r' (progress bar redraw) also ends a piece: it is emitted at once, whole, prefixed,
  // ending in '\r', so a redrawn bar keeps its prefix on a terminal and two ranks' bars never
  // mix. A '\r' with nothing before it (tqdm writes "\r" + bar) emits nothing — no lone prefix
  // for the next rank's bar to follow — and a '\n' right after a redrawn piece ends it as is.
  // A piece that follows a '\r' and is still open when `data` ends (tqdm's "\rstep 3", whose end
  // is the next redraw, seconds later) is shown at once, prefixed and ending in '\r'; if more of
  // it comes, it is shown again whole, and a '\n' ending it repeats it as a line.
  std::string feed(std::string_view data);

  // The unterminated rest (prefixed, with '\n' added), or "" if there is none. For EOF.
  std::string flush();

 private:
  void emit(std::string& out, char end);

  std::string prefix_;
  bool mpi_tags_ = false;
  std::string partial_;
  bool after_redraw_ = false;  // the last thing emitted was a piece ending in '\r'
  bool in_redraw_ = false;     // the piece being read follows a '\r' (a progress bar's)
  std::string shown_;          // an open redraw piece shown at the end of the last feed
};

}  // namespace accel::launcher
