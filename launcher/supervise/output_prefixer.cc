#include "launcher/supervise/output_prefixer.h"

#include <cctype>

namespace accel::launcher {
namespace {

// Digits at `at` of `text`, moving `at` past them; "" when there are none.
std::string digitsAt(const std::string& text, size_t& at) {
  const size_t start = at;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
  return text.substr(start, at - start);
}

// "[1,3]<stdout>:text" (Open MPI) or "[3] text" (MPICH): the rank and where the text starts.
bool parseMpiTag(const std::string& piece, std::string& rank, size_t& textAt) {
  if (piece.empty() || piece[0] != '[') return false;
  size_t at = 1;
  std::string first = digitsAt(piece, at);
  if (first.empty() || at >= piece.size()) return false;
  if (piece[at] == ',') {  // Open MPI: [job,rank]<stream>:
    ++at;
    rank = digitsAt(piece, at);
    if (rank.empty() || piece.compare(at, 2, "]<") != 0) return false;
    const size_t colon = piece.find(">:", at);
    if (colon == std::string::npos) return false;
    textAt = colon + 2;
    return true;
  }
  if (piece.compare(at, 2, "] ") != 0) return false;  // MPICH: [rank] text
  rank = first;
  textAt = at + 2;
  return true;
}

}  // namespace

void OutputPrefixer::emit(std::string& out, char end) {
  std::string rank;
  size_t textAt = 0;
  if (!mpi_tags_) {
    out += prefix_;
    out += partial_;
  } else if (parseMpiTag(partial_, rank, textAt)) {
    out += "[rank " + rank + "] ";
    out.append(partial_, textAt, std::string::npos);
  } else {
    out += "[mpirun] ";
    out += partial_;
  }
  out += end;
  partial_.clear();
}

std::string OutputPrefixer::feed(std::string_view data) {
  std::string out;
  for (char c : data) {
    if (!shown_.empty()) {
      // The piece shown open goes on (redrawn whole later), ends with '\n' (repeated as a line),
      // or ended with '\r' as shown.
      if (c != '\r') partial_ = std::move(shown_);
      shown_.clear();
    }
    if (c == '\r' && partial_.empty()) {  // tqdm's leading '\r': nothing to redraw yet
      in_redraw_ = true;
      continue;
    }
    if (c == '\n' && partial_.empty() && after_redraw_) {
      out += c;  // "\r\n": the redrawn piece is final; no empty prefixed line
      after_redraw_ = in_redraw_ = false;
      continue;
    }
    if (c == '\n' || c == '\r') {
      emit(out, c);
      after_redraw_ = in_redraw_ = c == '\r';
      continue;
    }
    after_redraw_ = false;
    partial_ += c;
    if (partial_.size() >= kMaxLine) emit(out, '\n');
  }
  if (in_redraw_ && !partial_.empty()) {  // a progress bar's piece: show it now
    shown_ = partial_;
    emit(out, '\r');
    after_redraw_ = true;
  }
  return out;
}

std::string OutputPrefixer::flush() {
  if (partial_.empty()) return "";
  std::string out;
  emit(out, '\n');
  return out;
}

}  // namespace accel::launcher
