// JPEG headers read without decoding: the frame a file announces, and which decoder data.decode = "gpu" gives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ddp {

// What a JPEG's markers say up to its first scan (ITU-T T.81 B.2), and whether an EOI marker follows that scan.
struct JpegFrame {
  uint8_t sof = 0;     // the frame marker's second byte: 0xC0 baseline, 0xC1 extended, 0xC2 progressive, ...
  int precision = 0;   // bits per sample
  int components = 0;  // 1 to 255
  int64_t width = 0, height = 0;
  uint8_t ids[3] = {};       // the first three components' identifiers
  uint8_t sampling[3] = {};  // and their sampling factors, horizontal << 4 | vertical
  bool jfif = false;         // an APP0 "JFIF" segment
  int adobe_transform = -1;  // an APP14 "Adobe" segment's colour transform (0 none, 1 YCbCr, 2 YCCK); -1 without one
  int scan_components = 0;   // components in the first scan
  bool eoi_after_scan = false;
};

// The frame of the JPEG in bytes[0, size), read from SOI to the first SOS; nullopt when that part does not parse: no
// SOI, a marker where none can be, a segment longer than what is left or too short for its fields, a second frame
// header, a scan before the frame header, no scan at all. Reads no byte past `size` and allocates nothing.
std::optional<JpegFrame> parse_jpeg_frame(const uint8_t* bytes, size_t size);

// Why the file in `bytes` goes to the CPU decoder when data.decode = "gpu" (one short phrase), or "" when nvJPEG
// decodes it. nvJPEG takes baseline and progressive Huffman JPEGs of 8-bit samples with one component or three in
// YCbCr at the chroma subsamplings 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1 and 4:1:0 (its documentation's "JPEG options");
// everything else is decoded on the CPU, which also gives every error the CPU path gives: files that are not JPEG
// (PNG), whose header does not parse, whose scan has no EOI marker after it (truncated), that announce more than
// `max_pixels` pixels (> 0), of 12 bits, arithmetic-coded, lossless or hierarchical, of 2 or 4 components (CMYK,
// YCCK), or of three components stored as RGB (Adobe transform 0, or no JFIF/Adobe segment and components named
// R, G, B, as libjpeg reads them).
std::string cpu_decode_reason(const uint8_t* bytes, size_t size, int64_t max_pixels);

}  // namespace ddp
