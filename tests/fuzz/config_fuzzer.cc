// libFuzzer target for the config loader: any bytes must give a config or an error message,
// never a crash, hang, leak or sanitizer report. Loaded configs must survive a save/load
// round trip unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = accel::config::parseConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    if (config.error().empty()) std::abort();  // every failure must explain itself
    return 0;
  }
  auto doc = config->toDocument();
  auto again = accel::config::parseConfig(accel::config::renderYaml(doc), "again.yaml");
  if (!again.ok() || !(again->toDocument() == doc)) std::abort();
  auto fromJson = accel::config::parseConfig(accel::config::renderJson(doc), "again.json");
  if (!fromJson.ok() || !(fromJson->toDocument() == doc)) std::abort();
  return 0;
}
