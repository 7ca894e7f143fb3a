// libFuzzer target: the JPEG header reader behind data.decode = "gpu"'s choice of decoder (bounds-checked parsing).
#include "data/jpeg_header.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<ddp::JpegFrame> frame = ddp::parse_jpeg_frame(data, size);
  if (frame && (frame->components < 1 || frame->width > 65535 || frame->height > 65535)) std::abort();
  const std::string reason = ddp::cpu_decode_reason(data, size, 4000000);
  // nvJPEG gets only 8-bit baseline or progressive frames of 1 or 3 components within the pixel limit.
  if (reason.empty() && (!frame || frame->precision != 8 || (frame->sof != 0xC0 && frame->sof != 0xC2) ||
                         (frame->components != 1 && frame->components != 3) || frame->width * frame->height > 4000000))
    std::abort();
  return 0;
}
