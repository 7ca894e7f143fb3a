// libFuzzer target: read_torch_save (zip bounds, pickle machine, IValue conversion) on arbitrary bytes.
#include "checkpoint/torch_save/pickle_reader.h"

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<char> bytes(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);
  try {
    ddp::read_torch_save(bytes);
  } catch (const ddp::TorchSaveFormatError&) {
    // the one outcome allowed besides success: any other exception, crash, leak or sanitizer report is a finding
  }
  return 0;
}
