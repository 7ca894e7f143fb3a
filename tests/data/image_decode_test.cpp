// The JPEG/PNG decoder: pixels against Pillow's Image.open(p).convert("RGB") (tests/python/image_reference.py), DCT
// scaling against Pillow's draft(), and hostile files (truncated, empty, not an image, oversized or corrupt headers).
#include "data/image_decode.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

// Small valid images (the fuzz target's seed corpus doubles as these tests' base files: no Python needed).
std::string image_decode_corpus(const std::string& name) {
  return read_file(source_dir() + "/tests/fuzz/corpus/image_decode/" + name);
}

DecodedImage image_decode_bytes(const std::string& bytes, const DecodeOptions& options = {}) {
  return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), options);
}

// The error read_image gives for a file holding `bytes`, without its "<path>: " prefix (checked here).
std::string image_decode_error(const TempDir& dir, const std::string& name, const std::string& bytes,
                               const DecodeOptions& options = {}) {
  const std::string path = dir / name;
  write_file(path, bytes);
  const std::string message = error_of([&] { read_image(path, options); });
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  return message.substr(std::min(message.size(), path.size() + 2));
}

uint32_t image_decode_be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) | (uint32_t(uint8_t(s[at + 2])) << 8) |
         uint8_t(s[at + 3]);
}

void image_decode_put_be32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (24 - 8 * i));
}

// A PNG chunk (length, type, data, CRC); a wrong CRC when bad_crc.
std::string image_decode_png_chunk(const std::string& type, const std::string& data, bool bad_crc = false) {
  std::string chunk(4, '\0');
  image_decode_put_be32(chunk, 0, static_cast<uint32_t>(data.size()));
  chunk += type + data;
  const auto crc = crc32(0, reinterpret_cast<const Bytef*>(chunk.data() + 4), static_cast<uInt>(chunk.size() - 4));
  chunk += std::string(4, '\0');
  image_decode_put_be32(chunk, chunk.size() - 4, static_cast<uint32_t>(crc) ^ (bad_crc ? 1u : 0u));
  return chunk;
}

TEST(ImageDecode, MatchesPillowOnEveryKindOfImage) {
  if (!python_has_modules("PIL")) GTEST_SKIP() << python() << " does not have PIL (Pillow)";
  TempDir dir;
  const auto made =
      run_command(shell_quote(python()) + " " + shell_quote(source_dir() + "/tests/python/image_reference.py") + " " +
                  shell_quote(dir.path()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  int checked = 0;
  for (const std::string& line : read_lines(dir / "manifest.txt")) {
    std::istringstream fields(line);
    std::string image, rgb;
    int64_t width = 0, height = 0, min_side = 0;
    ASSERT_TRUE(fields >> image >> rgb >> width >> height >> min_side) << line;
    SCOPED_TRACE(line);
    DecodeOptions options;
    options.min_side = min_side;
    const DecodedImage decoded = read_image(dir / image, options);
    ASSERT_EQ(decoded.width, width);
    ASSERT_EQ(decoded.height, height);
    const std::string pillow = read_file(dir / rgb);
    ASSERT_EQ(decoded.rgb.size(), pillow.size());
    int max_diff = 0;
    for (size_t i = 0; i < pillow.size(); ++i)
      max_diff = std::max(max_diff, std::abs(decoded.rgb[i] - uint8_t(pillow[i])));
    const bool png = image.size() > 4 && image.compare(image.size() - 4, 4, ".png") == 0;
    // PNG decoding is exact; JPEG within +-2, as Pillow bundles a libjpeg-turbo release of its own (so far the
    // pixels have been identical: max 0).
    EXPECT_LE(max_diff, png ? 0 : 2);
    std::cout << "[ ImageDecode ] " << rgb << " (" << width << "x" << height << "): max |diff| vs Pillow " << max_diff
              << "\n";
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

TEST(ImageDecode, MinSidePicksTheSmallestJpegScaleThatKeepsTheShorterSide) {
  const std::string jpeg = image_decode_corpus("rgb_40x30.jpg");
  const std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> cases = {
      {0, {40, 30}}, {1, {5, 4}},    {4, {5, 4}},    {5, {10, 8}},    {8, {10, 8}},
      {9, {20, 15}}, {15, {20, 15}}, {16, {40, 30}}, {1000, {40, 30}}};
  for (const auto& [min_side, size] : cases) {
    DecodeOptions options;
    options.min_side = min_side;
    const DecodedImage image = image_decode_bytes(jpeg, options);
    EXPECT_EQ(image.width, size.first) << "min_side " << min_side;
    EXPECT_EQ(image.height, size.second) << "min_side " << min_side;
    EXPECT_EQ(image.rgb.size(), static_cast<size_t>(size.first * size.second * 3));
  }
  DecodeOptions options;  // PNG has no DCT scaling: always full size
  options.min_side = 2;
  EXPECT_EQ(image_decode_bytes(image_decode_corpus("rgb_9x7.png"), options).width, 9);
}

// A planned region decodes only its rows and the iMCU columns around it, to the same pixels as the whole image decoded
// at the same scale (JPEG: baseline 4:2:0, progressive, grayscale, CMYK); a PNG is decoded whole.
TEST(ImageDecode, PlannedRegionGivesThePixelsOfTheWholeDecode) {
  struct Case {
    std::string file;
    DecodeRegion region;
  };
  const std::vector<Case> cases = {
      {"rgb_40x30.jpg", {1, 3, 17, 20, 9}},       {"rgb_40x30.jpg", {1, 0, 0, 30, 40}},
      {"rgb_40x30.jpg", {2, 5, 9, 7, 6}},         {"rgb_40x30.jpg", {1, 29, 39, 1, 1}},
      {"progressive_16x16.jpg", {1, 4, 9, 5, 5}}, {"gray_9x7.jpg", {1, 2, 3, 4, 5}},
      {"cmyk_8x8.jpg", {1, 1, 2, 3, 4}},
  };
  for (const auto& c : cases) {
    const std::string bytes = image_decode_corpus(c.file);
    int64_t asked_h = 0, asked_w = 0;
    DecodeOptions options;
    options.plan = [&](int64_t h, int64_t w) { return asked_h = h, asked_w = w, c.region; };
    const DecodedImage part = image_decode_bytes(bytes, options);
    DecodeOptions whole_options;
    whole_options.plan = [&](int64_t, int64_t) { return DecodeRegion{c.region.scale}; };
    const DecodedImage whole = image_decode_bytes(bytes, whole_options);
    const std::string what = c.file + " rows " + std::to_string(c.region.top) + "+" + std::to_string(c.region.height) +
                             " columns " + std::to_string(c.region.left) + "+" + std::to_string(c.region.width);
    EXPECT_GT(asked_h, 0) << what;  // the full size, from the header
    EXPECT_EQ(part.scale, c.region.scale) << what;
    EXPECT_EQ(part.top, c.region.top) << what;
    EXPECT_EQ(part.height, c.region.height) << what;
    EXPECT_LE(part.left, c.region.left) << what;
    EXPECT_GE(part.left + part.width, c.region.left + c.region.width) << what;
    auto view = [](const DecodedImage& d) {
      return torch::from_blob(const_cast<uint8_t*>(d.rgb.data()), {d.height, d.width, 3}, torch::kUInt8);
    };
    const auto& r = c.region;
    const torch::Tensor expected = view(whole).slice(0, r.top, r.top + r.height).slice(1, r.left, r.left + r.width);
    const torch::Tensor got = view(part).slice(1, r.left - part.left, r.left - part.left + r.width);
    EXPECT_TRUE(torch::equal(got, expected))
        << what << ": max |difference| " << (got.to(torch::kInt) - expected.to(torch::kInt)).abs().max().item<int>();
  }
  DecodeOptions options;
  bool asked = false;
  options.plan = [&](int64_t, int64_t) { return asked = true, DecodeRegion{1, 1, 1, 2, 2}; };
  const DecodedImage png = image_decode_bytes(image_decode_corpus("rgb_9x7.png"), options);
  EXPECT_TRUE(asked);
  EXPECT_EQ(png.width, 9);
  EXPECT_EQ(png.top, 0);
}

TEST(ImageDecode, TruncatedFilesAreErrors) {
  TempDir dir;
  const std::string jpeg = image_decode_corpus("rgb_40x30.jpg"), png = image_decode_corpus("rgb_9x7.png");
  EXPECT_EQ(image_decode_error(dir, "half.jpg", jpeg.substr(0, jpeg.size() / 2)),
            "truncated JPEG (premature end of data)");
  // Only the EOI marker missing: Pillow raises "image file is truncated" too.
  EXPECT_EQ(image_decode_error(dir, "no_eoi.jpg", jpeg.substr(0, jpeg.size() - 2)),
            "truncated JPEG (premature end of data)");
  EXPECT_EQ(image_decode_error(dir, "soi.jpg", "\xFF\xD8\xFF"), "truncated JPEG (premature end of data)");
  // A region above the cut: the rows after it are still read, so the file is an error all the same.
  DecodeOptions top_rows;
  top_rows.plan = [](int64_t, int64_t) { return DecodeRegion{1, 0, 0, 2, 8}; };
  EXPECT_EQ(image_decode_error(dir, "half_region.jpg", jpeg.substr(0, jpeg.size() / 2), top_rows),
            "truncated JPEG (premature end of data)");
  const std::string progressive = image_decode_corpus("progressive_16x16.jpg");
  EXPECT_EQ(image_decode_error(dir, "half_progressive.jpg", progressive.substr(0, progressive.size() / 2)),
            "truncated JPEG (premature end of data)");
  EXPECT_EQ(image_decode_error(dir, "half.png", png.substr(0, png.size() / 2)),
            "truncated PNG (premature end of data)");
  EXPECT_EQ(image_decode_error(dir, "signature.png", png.substr(0, 8)), "truncated PNG (premature end of data)");
}

TEST(ImageDecode, FilesThatAreNoImageAreClearErrors) {
  TempDir dir;
  EXPECT_EQ(image_decode_error(dir, "empty.png", ""), "empty file");
  const std::string text = image_decode_error(dir, "x.jpg", "hello, this is text\n");
  EXPECT_EQ(text.rfind("not a JPEG or PNG image", 0), 0u) << text;
  EXPECT_NE(text.find("68 65 6C 6C 6F 2C 20 74"), std::string::npos) << text;  // its first bytes
  std::string noise(4096, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
  EXPECT_EQ(image_decode_error(dir, "noise.png", noise).rfind("not a JPEG or PNG image", 0), 0u);
  // A corrupt header (an SOF0 too short for its 2 components): libjpeg's own message, one line.
  const char sof[] = "\xFF\xD8\xFF\xC0\x00\x0B\x08\x00\x10\x00\x10\x02\x01\x11\x00\x02\x11\x00";
  EXPECT_EQ(image_decode_error(dir, "bad_sof.jpg", std::string(sof, sizeof sof - 1)),
            "invalid JPEG: Bogus marker length");
  const std::string missing = error_of([&] { read_image(dir / "missing.jpg", {}); });
  EXPECT_EQ(missing, dir / "missing.jpg" + ": cannot open: No such file or directory");
}

TEST(ImageDecode, HeadersAnnouncingTooManyPixelsAreRefusedBeforeDecoding) {
  TempDir dir;
  // A JPEG's SOF0 holds 16-bit sizes: 65000x65000 (12.7 GB of RGB) is refused from the header alone.
  std::string jpeg = image_decode_corpus("rgb_40x30.jpg");
  const size_t sof = jpeg.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) jpeg[at] = static_cast<char>(0xFD), jpeg[at + 1] = static_cast<char>(0xE8);
  EXPECT_EQ(image_decode_error(dir, "huge.jpg", jpeg),
            "image of 65000x65000 = 4225000000 pixels exceeds data.max_image_pixels = 89478485");
  // A PNG IHDR of 100000x100000, its CRC fixed up.
  std::string png = image_decode_corpus("rgb_9x7.png");
  std::string ihdr = png.substr(16, 13);
  image_decode_put_be32(ihdr, 0, 100000);
  image_decode_put_be32(ihdr, 4, 100000);
  png = png.substr(0, 8) + image_decode_png_chunk("IHDR", ihdr) + png.substr(33);
  EXPECT_EQ(image_decode_error(dir, "huge.png", png),
            "image of 100000x100000 = 10000000000 pixels exceeds data.max_image_pixels = 89478485");
  // A limit below an ordinary image's size.
  DecodeOptions small;
  small.max_pixels = 1000;
  EXPECT_EQ(image_decode_error(dir, "small.jpg", image_decode_corpus("rgb_40x30.jpg"), small),
            "image of 40x30 = 1200 pixels exceeds data.max_image_pixels = 1000");
  small.max_pixels = 62;
  EXPECT_EQ(image_decode_error(dir, "small.png", image_decode_corpus("rgb_9x7.png"), small),
            "image of 9x7 = 63 pixels exceeds data.max_image_pixels = 62");
  small.max_pixels = 63;
  EXPECT_EQ(image_decode_bytes(image_decode_corpus("rgb_9x7.png"), small).rgb.size(), 9u * 7 * 3);
}

TEST(ImageDecode, PngChecksumsAreCheckedWherePillowChecksThem) {
  TempDir dir;
  const std::string png = image_decode_corpus("rgb_9x7.png");
  const DecodedImage good = image_decode_bytes(png);
  // Pillow checks every chunk's CRC before the image data (PngStream.crc), ancillary chunks' included ...
  std::string bad_ihdr = png;
  bad_ihdr[29] ^= 1;
  EXPECT_EQ(image_decode_error(dir, "bad_ihdr.png", bad_ihdr), "invalid PNG: IHDR: CRC error");
  const std::string bad_text =
      png.substr(0, 33) + image_decode_png_chunk("tEXt", std::string("k\0v", 3), true) + png.substr(33);
  EXPECT_EQ(image_decode_error(dir, "bad_text.png", bad_text), "invalid PNG: tEXt: CRC error");
  // ... but never the image data's (PngImageFile.load_read skips it): a bad IDAT CRC still decodes.
  const size_t idat = png.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  std::string bad_idat = png;
  bad_idat[idat + 4 + image_decode_be32(png, idat - 4)] ^= 1;
  EXPECT_EQ(image_decode_bytes(bad_idat).rgb, good.rgb);
  // Nothing after the image data is read (Pillow's load_end tolerates a missing IEND).
  EXPECT_EQ(image_decode_bytes(png.substr(0, png.size() - 12)).rgb, good.rgb);
}

}  // namespace
}  // namespace ddp::test
