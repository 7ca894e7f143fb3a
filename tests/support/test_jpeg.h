// JPEG files written by libjpeg-turbo for tests: every kind its 8-bit build writes (baseline at any sampling,
// progressive, arithmetic-coded, SOF1, restart markers, grayscale, CMYK, YCCK, RGB without transform).
#pragma once

#include <string>

namespace ddp::test {

struct TestJpeg {
  enum class Colour { YCbCr, Gray, Rgb, Cmyk, Ycck };  // what the file stores (JCS_YCbCr, ...); Rgb: Adobe transform 0
  int width = 40, height = 30;
  Colour colour = Colour::YCbCr;
  int luma_h = 2, luma_v = 2, chroma_h = 1, chroma_v = 1;  // sampling factors (libjpeg's default: 4:2:0)
  bool progressive = false, arithmetic = false, optimize = false;
  int restart_rows = 0;  // restart_in_rows
  int quality = 75;
  bool force_baseline = true;  // false with a low quality: 16-bit quantisation tables, an SOF1 frame
  int seed = 0;                // varies the smooth pixels
};

// The file's bytes.
std::string encode_test_jpeg(const TestJpeg& spec);

}  // namespace ddp::test
