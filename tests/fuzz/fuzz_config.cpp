// libFuzzer target: parse_config (TOML parsing, schema validation, defaults, consistency) on arbitrary text.
#include "config/config.h"
#include "train/linked_kinds.h"

#include <cstddef>
#include <cstdint>
#include <string>

// The rows of the models, optimizers and datasets the target links (fuzz_rows), as ddptrain's main hands them down.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  ddp::hand_down_linked_kinds();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ddp::parse_config(text, "fuzz.toml", {});
  } catch (const ddp::ConfigError&) {
    // the one outcome allowed besides success
  }
  return 0;
}
