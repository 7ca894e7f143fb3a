// libFuzzer target: read_safetensors (header length, JSON header, byte ranges, tensor reads) on arbitrary bytes.
#include "checkpoint/safetensors.h"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    ddp::read_safetensors(in, size, "input.safetensors");
  } catch (const std::runtime_error&) {
    // the one outcome allowed besides success: any other exception, crash, leak, allocation over -malloc_limit_mb
    // or sanitizer report is a finding
  }
  return 0;
}
