// libFuzzer target for the store's frame parser: any byte stream, its generation told from its
// first bytes and then parsed request after request as the server does, must give complete
// requests, "need more" or "invalid" — never a crash, an over-limit allocation or a read past
// the input — and every complete request must encode back to exactly the bytes it was parsed
// from. The corpus (corpus/store) holds the transcripts of every torch generation's client.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "libaccel/store/wire_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::store::wire;
  ParseLimits limits;
  limits.max_value_bytes = 4096;
  limits.max_keys = 64;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Detection d = detectGeneration(input);
  if (d.status == ParseStatus::Invalid && d.error.empty()) std::abort();
  if (d.status != ParseStatus::Complete) return 0;
  while (!input.empty()) {
    Request request;
    ParseResult r = parseRequest(d.generation, input, limits, request);
    if (r.status != ParseStatus::Complete) {
      if (r.status == ParseStatus::Invalid && r.error.empty()) std::abort();
      break;
    }
    if (r.consumed == 0 || r.consumed > input.size()) std::abort();
    if (encodeRequest(d.generation, request) != input.substr(0, r.consumed)) std::abort();
    input.remove_prefix(r.consumed);
  }
  return 0;
}
