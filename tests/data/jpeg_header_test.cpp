// The JPEG header reader and the decoder choice of data.decode = "gpu": each kind of file libjpeg-turbo writes (and the
// kinds it cannot write, made by editing a header) goes to nvJPEG or to the CPU decoder as nvJPEG's documentation
// allows; truncated, empty, oversized and mangled files go to the CPU decoder, which gives them the CPU path's errors.
#include "data/image_decode.h"
#include "data/jpeg_header.h"
#include "tests/support/test_jpeg.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

using Colour = TestJpeg::Colour;

// A TestJpeg of 40x30 (libjpeg's defaults otherwise) after `edit`.
template <class F>
std::string jpeg_header_make(F edit) {
  TestJpeg spec;
  edit(spec);
  return encode_test_jpeg(spec);
}
std::string jpeg_header_rgb() { return encode_test_jpeg({}); }

std::string jpeg_header_reason(const std::string& bytes, int64_t max_pixels = 89478485) {
  return cpu_decode_reason(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), max_pixels);
}

std::optional<JpegFrame> jpeg_header_frame(const std::string& bytes) {
  return parse_jpeg_frame(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// The offset of the first frame marker's code (FF Cn), so that a test can edit the header.
size_t jpeg_header_sof(const std::string& bytes) {
  for (size_t i = 2; i + 1 < bytes.size(); ++i)
    if (uint8_t(bytes[i]) == 0xFF && (uint8_t(bytes[i + 1]) & 0xF0) == 0xC0 && uint8_t(bytes[i + 1]) != 0xC4)
      return i + 1;
  ADD_FAILURE() << "no frame marker";
  return 0;
}

std::string jpeg_header_sampled(int luma_h, int luma_v, int chroma_h, int chroma_v) {
  return jpeg_header_make(
      [&](TestJpeg& j) { j.luma_h = luma_h, j.luma_v = luma_v, j.chroma_h = chroma_h, j.chroma_v = chroma_v; });
}

TEST(JpegHeader, FrameFieldsAreReadFromTheMarkers) {
  const std::optional<JpegFrame> f = jpeg_header_frame(jpeg_header_rgb());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->sof, 0xC0);
  EXPECT_EQ(f->precision, 8);
  EXPECT_EQ(f->components, 3);
  EXPECT_EQ(f->width, 40);
  EXPECT_EQ(f->height, 30);
  EXPECT_TRUE(f->jfif);
  EXPECT_EQ(f->adobe_transform, -1);
  EXPECT_EQ(f->sampling[0], 0x22);  // libjpeg's default 4:2:0
  EXPECT_EQ(f->sampling[1], 0x11);
  EXPECT_EQ(f->scan_components, 3);
  EXPECT_TRUE(f->eoi_after_scan);
  const std::optional<JpegFrame> cmyk =
      jpeg_header_frame(jpeg_header_make([](TestJpeg& j) { j.colour = Colour::Cmyk; }));
  ASSERT_TRUE(cmyk);
  EXPECT_EQ(cmyk->components, 4);
  EXPECT_EQ(cmyk->adobe_transform, 0);  // libjpeg writes an Adobe segment for CMYK: no transform
  const std::optional<JpegFrame> progressive =
      jpeg_header_frame(jpeg_header_make([](TestJpeg& j) { j.progressive = true; }));
  ASSERT_TRUE(progressive);
  EXPECT_EQ(progressive->sof, 0xC2);
  EXPECT_EQ(progressive->scan_components, 3);  // the first scan: the interleaved DC coefficients
  EXPECT_TRUE(progressive->eoi_after_scan);
}

// What nvJPEG decodes ("JPEG options" of its documentation) goes to it; every other kind of file to the CPU decoder.
TEST(JpegHeader, EachKindOfFileGoesToTheDecoderThatTakesIt) {
  struct Case {
    std::string name, bytes, reason;
  };
  const auto gray = [](TestJpeg& j) { j.colour = Colour::Gray, j.width = 33, j.height = 17; };
  std::vector<Case> cases = {
      {"baseline 4:2:0", jpeg_header_rgb(), ""},
      {"baseline 4:4:4", jpeg_header_sampled(1, 1, 1, 1), ""},
      {"baseline 4:2:2", jpeg_header_sampled(2, 1, 1, 1), ""},
      {"baseline 4:4:0", jpeg_header_sampled(1, 2, 1, 1), ""},
      {"baseline 4:1:1", jpeg_header_sampled(4, 1, 1, 1), ""},
      {"optimized Huffman tables", jpeg_header_make([](TestJpeg& j) { j.optimize = true; }), ""},
      {"restart markers", jpeg_header_make([](TestJpeg& j) { j.restart_rows = 1; }), ""},
      {"grayscale", jpeg_header_make(gray), ""},
      {"progressive", jpeg_header_make([](TestJpeg& j) { j.progressive = true; }), ""},
      {"progressive grayscale", jpeg_header_make([&](TestJpeg& j) { gray(j), j.progressive = true; }), ""},
      {"arithmetic-coded", jpeg_header_make([](TestJpeg& j) { j.arithmetic = true; }), "arithmetic-coded JPEG"},
      {"arithmetic-coded progressive", jpeg_header_make([](TestJpeg& j) { j.arithmetic = j.progressive = true; }),
       "arithmetic-coded JPEG"},
      {"16-bit quantisation tables (SOF1)",
       jpeg_header_make([](TestJpeg& j) { j.quality = 5, j.force_baseline = false; }), "extended sequential JPEG"},
      {"CMYK", jpeg_header_make([](TestJpeg& j) { j.colour = Colour::Cmyk; }), "4-component JPEG"},
      {"YCCK", jpeg_header_make([](TestJpeg& j) { j.colour = Colour::Ycck; }), "4-component JPEG"},
      {"RGB without transform", jpeg_header_make([](TestJpeg& j) { j.colour = Colour::Rgb; }), "JPEG stored as RGB"},
      {"chroma sampled finer than luma", jpeg_header_sampled(1, 1, 2, 2),
       "JPEG chroma subsampling nvJPEG does not take"},
      {"luma 3x1", jpeg_header_sampled(3, 1, 1, 1), "JPEG chroma subsampling nvJPEG does not take"},
      {"PNG", read_file(source_dir() + "/tests/fuzz/corpus/image_decode/rgb_9x7.png"), "not a JPEG"},
      {"empty", "", "not a JPEG"},
      {"text", "hello", "not a JPEG"},
  };
  // What libjpeg-turbo (8-bit) cannot write: its header edited.
  std::string twelve = jpeg_header_rgb();
  twelve[jpeg_header_sof(twelve) + 3] = 12;
  cases.push_back({"12-bit", twelve, "12-bit JPEG"});
  for (uint8_t sof : {0xC3, 0xC7, 0xCB, 0xCF}) {
    std::string lossless = jpeg_header_rgb();
    lossless[jpeg_header_sof(lossless)] = static_cast<char>(sof);
    cases.push_back({"lossless SOF " + std::to_string(sof), lossless, "lossless JPEG"});
  }
  std::string hierarchical = jpeg_header_rgb();
  hierarchical[jpeg_header_sof(hierarchical)] = static_cast<char>(0xC5);
  cases.push_back({"hierarchical", hierarchical, "hierarchical JPEG"});
  std::string dnl = jpeg_header_rgb();  // height 0: given by a DNL marker after the first scan
  dnl[jpeg_header_sof(dnl) + 4] = dnl[jpeg_header_sof(dnl) + 5] = 0;
  cases.push_back({"height in a DNL marker", dnl, "JPEG without its size in the frame header"});
  std::string huge = jpeg_header_rgb();  // 65000 x 65000
  for (size_t at : {jpeg_header_sof(huge) + 4, jpeg_header_sof(huge) + 6})
    huge[at] = static_cast<char>(0xFD), huge[at + 1] = static_cast<char>(0xE8);
  cases.push_back({"65000x65000", huge, "JPEG larger than data.max_image_pixels"});
  const std::string good = jpeg_header_rgb();
  cases.push_back({"no EOI", good.substr(0, good.size() - 2), "JPEG without an end-of-image marker (truncated)"});
  cases.push_back({"only SOI", good.substr(0, 3), "JPEG header does not parse"});
  for (const Case& c : cases) EXPECT_EQ(jpeg_header_reason(c.bytes), c.reason) << c.name;
  EXPECT_EQ(jpeg_header_reason(good, 1200), "");  // 40 x 30 = 1200: within the limit
  EXPECT_EQ(jpeg_header_reason(good, 1199), "JPEG larger than data.max_image_pixels");
}

// Every file sent to the CPU decoder whose decoding fails there fails as the CPU path says; and every prefix of a
// JPEG (a file cut anywhere, down to zero bytes) goes to the CPU decoder, which refuses it: a truncated file never
// reaches nvJPEG, and its error is the CPU path's.
TEST(JpegHeader, TruncatedFilesGoToTheCpuDecoderAndFailThere) {
  TempDir dir;
  for (const std::string& whole :
       {jpeg_header_rgb(), jpeg_header_make([](TestJpeg& j) { j.progressive = true; }),
        jpeg_header_make([](TestJpeg& j) { j.colour = Colour::Gray, j.restart_rows = 1; })}) {
    ASSERT_EQ(jpeg_header_reason(whole), "");
    EXPECT_NO_THROW(decode_image(reinterpret_cast<const uint8_t*>(whole.data()), whole.size(), {}));
    for (size_t n = 0; n < whole.size(); ++n) {
      const std::string cut = whole.substr(0, n);
      ASSERT_NE(jpeg_header_reason(cut), "") << n << " of " << whole.size() << " bytes";
      const std::string path = dir / "cut.jpg";
      write_file(path, cut);
      const std::string error = error_of([&] { read_image(path, {}); });
      ASSERT_EQ(error.rfind(path + ": ", 0), 0u) << n << ": " << error;  // the CPU path's error, naming the file
    }
  }
}

// Hostile headers: segment lengths past the end or too short for their fields, runs of fill bytes, markers where none
// can be, frames after scans, and thousands of random edits of a real header. Each is read without reading past the
// buffer (the ASan fuzz target fuzz_jpeg_header checks that) and gives a reason or "", never a crash.
TEST(JpegHeader, HostileHeadersAreRefusedOrRead) {
  const auto bytes = [](std::initializer_list<int> v) {
    std::string s;
    for (int b : v) s += static_cast<char>(b);
    return s;
  };
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8})));
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0xFF, 0xFF, 0xFF, 0xFF})));                    // fill to the end
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF, 0x00})));              // length past end
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01})));                    // length < 2
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x05, 0x08, 0x00, 0x10})));  // SOF too short
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02})));                    // scan, no frame
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0xFF, 0xD9})));                                // EOI first
  EXPECT_FALSE(jpeg_header_frame(bytes({0xFF, 0xD8, 0x00, 0xFF})));                                // no marker
  // An SOF announcing 2 components with the length of 1 (the CPU decoder's "Bogus marker length" case).
  EXPECT_FALSE(jpeg_header_frame(
      bytes({0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00, 0x10, 0x00, 0x10, 0x02, 0x01, 0x11, 0x00, 0x02, 0x11})));
  // Two frame headers.
  const std::string good = jpeg_header_rgb();
  const size_t sof = jpeg_header_sof(good) - 1;
  const size_t sof_length = (uint8_t(good[sof + 2]) << 8 | uint8_t(good[sof + 3])) + 2;
  EXPECT_FALSE(jpeg_header_frame(good.substr(0, sof) + good.substr(sof, sof_length) + good.substr(sof)));
  std::mt19937 random(7);
  int gpu = 0, cpu = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string mangled = good.substr(0, std::min(good.size(), size_t{200} + random() % good.size()));
    for (int edits = 1 + static_cast<int>(random() % 4); edits > 0; --edits)
      mangled[random() % std::min<size_t>(mangled.size(), 200)] = static_cast<char>(random() % 256);
    (jpeg_header_reason(mangled).empty() ? gpu : cpu) += 1;
  }
  EXPECT_GT(cpu, 0);
  EXPECT_GT(gpu, 0);  // an edit of a table or of pixel data leaves a header nvJPEG may take
}

}  // namespace
}  // namespace ddp::test
