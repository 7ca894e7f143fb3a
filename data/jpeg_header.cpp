// JPEG marker parsing up to the first scan (ITU-T T.81 annex B), bounds-checked, and the nvJPEG-or-CPU decision.
#include "data/jpeg_header.h"

#include <cstring>

namespace ddp {
namespace {

uint32_t be16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 8 | p[1]; }

// The frame header's fields (SOFn's segment after its length); false when the length does not match them.
bool read_frame(const uint8_t* data, size_t length, JpegFrame& frame) {
  if (length < 6) return false;
  frame.precision = data[0];
  frame.height = be16(data + 1);
  frame.width = be16(data + 3);
  frame.components = data[5];
  if (frame.components == 0 || length != 6 + 3 * static_cast<size_t>(frame.components)) return false;
  for (int c = 0; c < frame.components && c < 3; ++c) {
    frame.ids[c] = data[6 + 3 * c];
    frame.sampling[c] = data[7 + 3 * c];
  }
  return true;
}

// An FF D9 pair at or after `from`: inside entropy-coded data an FF is followed by 00 or a restart marker, so the
// first one is the EOI marker (or a marker of a later scan's header, which never is D9).
bool has_eoi(const uint8_t* bytes, size_t size, size_t from) {
  for (size_t i = from; i + 1 < size; ++i) {
    const void* ff = std::memchr(bytes + i, 0xFF, size - 1 - i);
    if (!ff) return false;
    i = static_cast<size_t>(static_cast<const uint8_t*>(ff) - bytes);
    if (bytes[i + 1] == 0xD9) return true;
  }
  return false;
}

bool is_frame_marker(uint8_t m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

// The chroma subsampling of three components nvJPEG names (nvjpegChromaSubsampling_t), from the luma sampling factors
// when both chroma components are 1x1: 4:4:4 1x1, 4:2:2 2x1, 4:2:0 2x2, 4:4:0 1x2, 4:1:1 4x1, 4:1:0 4x2.
bool known_subsampling(const JpegFrame& f) {
  if (f.sampling[1] != 0x11 || f.sampling[2] != 0x11) return false;
  switch (f.sampling[0]) {
    case 0x11:
    case 0x21:
    case 0x22:
    case 0x12:
    case 0x41:
    case 0x42:
      return true;
    default:
      return false;
  }
}

// libjpeg's reading of three components (jdapimin.c default_decompress_parms): RGB when an Adobe segment says no
// transform, or without JFIF and Adobe segments when the components are named R, G, B.
bool stored_as_rgb(const JpegFrame& f) {
  if (f.jfif) return false;
  if (f.adobe_transform >= 0) return f.adobe_transform == 0;
  return f.ids[0] == 'R' && f.ids[1] == 'G' && f.ids[2] == 'B';
}

}  // namespace

std::optional<JpegFrame> parse_jpeg_frame(const uint8_t* bytes, size_t size) {
  if (size < 2 || bytes[0] != 0xFF || bytes[1] != 0xD8) return std::nullopt;
  JpegFrame frame;
  bool have_frame = false;
  size_t at = 2;
  for (;;) {
    // A marker: FF, any number of fill FFs, then its code.
    if (at >= size || bytes[at] != 0xFF) return std::nullopt;
    while (at < size && bytes[at] == 0xFF) ++at;
    if (at >= size) return std::nullopt;
    const uint8_t marker = bytes[at++];
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // TEM, RSTn: no segment
    if (marker == 0x00 || marker == 0xD8 || marker == 0xD9) return std::nullopt;
    if (size - at < 2) return std::nullopt;
    const size_t length = be16(bytes + at);
    if (length < 2 || length > size - at) return std::nullopt;
    const uint8_t* data = bytes + at + 2;
    const size_t n = length - 2;
    at += length;
    if (is_frame_marker(marker)) {
      if (have_frame || !read_frame(data, n, frame)) return std::nullopt;
      frame.sof = marker;
      have_frame = true;
    } else if (marker == 0xE0) {
      if (n >= 5 && std::memcmp(data, "JFIF\0", 5) == 0) frame.jfif = true;
    } else if (marker == 0xEE) {
      if (n >= 12 && std::memcmp(data, "Adobe", 5) == 0) frame.adobe_transform = data[11];
    } else if (marker == 0xDA) {
      if (!have_frame || n < 1) return std::nullopt;
      frame.scan_components = data[0];
      if (n != 4 + 2 * static_cast<size_t>(frame.scan_components)) return std::nullopt;
      frame.eoi_after_scan = has_eoi(bytes, size, at);
      return frame;
    }
  }
}

std::string cpu_decode_reason(const uint8_t* bytes, size_t size, int64_t max_pixels) {
  if (size < 3 || bytes[0] != 0xFF || bytes[1] != 0xD8 || bytes[2] != 0xFF) return "not a JPEG";
  const std::optional<JpegFrame> frame = parse_jpeg_frame(bytes, size);
  if (!frame) return "JPEG header does not parse";
  const JpegFrame& f = *frame;
  if (f.sof != 0xC0 && f.sof != 0xC2) {
    if (f.sof == 0xC3 || f.sof == 0xC7 || f.sof == 0xCB || f.sof == 0xCF) return "lossless JPEG";
    if (f.sof >= 0xC9) return "arithmetic-coded JPEG";
    if (f.sof == 0xC5 || f.sof == 0xC6) return "hierarchical JPEG";
    return "extended sequential JPEG";
  }
  if (f.precision != 8) return std::to_string(f.precision) + "-bit JPEG";
  if (f.width == 0 || f.height == 0) return "JPEG without its size in the frame header";
  if (max_pixels > 0 && f.width * f.height > max_pixels) return "JPEG larger than data.max_image_pixels";
  if (f.components != 1 && f.components != 3) return std::to_string(f.components) + "-component JPEG";
  if (f.components == 3 && stored_as_rgb(f)) return "JPEG stored as RGB";
  if (f.components == 3 && !known_subsampling(f)) return "JPEG chroma subsampling nvJPEG does not take";
  if (f.scan_components < 1 || f.scan_components > f.components) return "JPEG scan header does not parse";
  if (!f.eoi_after_scan) return "JPEG without an end-of-image marker (truncated)";
  return "";
}

}  // namespace ddp
