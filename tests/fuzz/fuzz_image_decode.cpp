// libFuzzer target: decode_image (JPEG through libjpeg-turbo, PNG through libpng, both behind longjmp error handlers).
#include "data/image_decode.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::DecodeOptions options;
  options.max_pixels = 4000000;          // bounds the work and memory of one input
  options.min_side = size % 3 ? 0 : 24;  // a third of the inputs through libjpeg's DCT scaling
  if (size % 5 == 1)                     // a fifth as a training crop's region (rows skipped, columns cropped)
    options.plan = [size](int64_t height, int64_t width) {
      const unsigned scale = 1u << (size % 4);
      const int64_t h = (height + scale - 1) / scale, w = (width + scale - 1) / scale;
      return ddp::DecodeRegion{scale, static_cast<int64_t>(size) % h, static_cast<int64_t>(size / 7) % w,
                               1 + static_cast<int64_t>(size / 3) % h, 1 + static_cast<int64_t>(size / 11) % w};
    };
  try {
    const ddp::DecodedImage image = ddp::decode_image(data, size, options);
    if (image.width <= 0 || image.height <= 0 || image.width * image.height > options.max_pixels ||
        image.rgb.size() != static_cast<size_t>(image.width * image.height * 3))
      std::abort();
  } catch (const std::exception& e) {
    // errors are one line
    if (std::string(e.what()).find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
