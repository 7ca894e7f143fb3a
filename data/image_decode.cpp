// JPEG (libjpeg-turbo) and PNG (libpng) decoding to RGB with Pillow's conversions, behind decode_image/read_image.
#include "data/image_decode.h"

#include <cstdio>  // before jpeglib.h, which uses FILE
#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace ddp {
namespace {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

// Refuses an empty or too large image, from its header's size, before any pixel buffer is allocated.
void check_image_size(int64_t width, int64_t height, const DecodeOptions& options) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width <= 0 || height <= 0) fail("image of " + size + " has no pixels");
  const int64_t pixels = width * height;
  if (options.max_pixels > 0 && pixels > options.max_pixels) {
    fail("image of " + size + " = " + std::to_string(pixels) +
         " pixels exceeds data.max_image_pixels = " + std::to_string(options.max_pixels));
  }
}

// Both libraries report errors through a callback that must not return; it longjmps back to the setjmp in
// jpeg_step/png_step. Everything those steps run (the libraries, the callbacks, the step functions) is C-like code
// without objects that have destructors, so the longjmp skips none; C++ objects live in the callers' frames.

// ---- JPEG ----

struct JpegJob {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr errors;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool created = false;
  // The region: rows [top, top + rows) of the scaled image, columns [left, left + width) once jpeg_crop_scanline
  // widened them to whole iMCUs (width 0: every column).
  JDIMENSION top = 0, rows = 0, left = 0, width = 0;
  uint8_t* out = nullptr;  // `rows` rows of output_width * 3 bytes
};

constexpr char kJpegTruncated[] = "truncated JPEG (premature end of data)";

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* job = static_cast<JpegJob*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, job->message);
  std::longjmp(job->jump, 1);
}

// libjpeg's warnings (corrupt entropy data, extraneous bytes between markers) are not errors, as in Pillow, whose
// decoder drops them - except running out of data: libjpeg warns (JWRN_JPEG_EOF), inserts an EOI marker and decodes
// the rest as grey, where Pillow raises "image file is truncated".
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  auto* job = static_cast<JpegJob*>(cinfo->client_data);
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
    std::snprintf(job->message, sizeof job->message, "%s", kJpegTruncated);
    std::longjmp(job->jump, 1);
  }
  cinfo->err->num_warnings++;
}

void jpeg_open(JpegJob& job, const uint8_t* bytes, size_t size) {
  job.cinfo.err = jpeg_std_error(&job.errors);
  job.errors.error_exit = jpeg_error_exit;
  job.errors.emit_message = jpeg_emit_message;
  job.cinfo.client_data = &job;
  jpeg_create_decompress(&job.cinfo);
  job.created = true;
  jpeg_mem_src(&job.cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&job.cinfo, TRUE);
}

// Pillow opens a 4-component JPEG as mode CMYK with rawmode "CMYK;I" (JpegImagePlugin: "assume adobe conventions"),
// so libjpeg's CMYK (YCCK converted) is inverted, then Image.convert("RGB") applies cmyk2rgb (libImaging/Convert.c):
// each channel nk - nk * ink / 255 with nk = 255 - K, in Pillow's rounding (MULDIV255).
void cmyk_row_to_rgb(const uint8_t* in, uint8_t* out, size_t width) {
  for (size_t x = 0; x < width; ++x, in += 4, out += 3) {
    const int nk = in[3];  // 255 - K with K = 255 - in[3]
    for (int c = 0; c < 3; ++c) {
      const int t = (255 - in[c]) * nk + 128;
      out[c] = static_cast<uint8_t>(nk - (((t >> 8) + t) >> 8));
    }
  }
}

// Starts the decompression and moves to the region: its columns (widened to whole iMCUs) and its first row.
void jpeg_start(JpegJob& job) {
  jpeg_decompress_struct& cinfo = job.cinfo;
  jpeg_start_decompress(&cinfo);
  if (job.width > 0 && job.width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &job.left, &job.width);
  if (job.top > 0) jpeg_skip_scanlines(&cinfo, job.top);
}

void jpeg_read_rows(JpegJob& job) {
  jpeg_decompress_struct& cinfo = job.cinfo;
  const size_t width = cinfo.output_width, stride = width * 3;
  const JDIMENSION end = job.top + job.rows;
  JSAMPARRAY cmyk = nullptr;  // a row from libjpeg's pool, freed by jpeg_destroy_decompress
  if (cinfo.out_color_space == JCS_CMYK) {
    cmyk = (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                      static_cast<JDIMENSION>(width * 4), 1);
  }
  while (cinfo.output_scanline < end) {
    uint8_t* row = job.out + (cinfo.output_scanline - job.top) * stride;
    JSAMPROW target = cmyk ? cmyk[0] : row;
    if (jpeg_read_scanlines(&cinfo, &target, 1) != 1) break;  // (a memory source never suspends)
    if (cmyk) cmyk_row_to_rgb(cmyk[0], row, width);
  }
  // The rows after the region: entropy-decoded only, so that data missing there is still an error.
  if (cinfo.output_scanline == end && end < cinfo.output_height) jpeg_skip_scanlines(&cinfo, cinfo.output_height - end);
  // No jpeg_finish_decompress: once every row is out Pillow reads no further (libImaging/JpegDecode.c accepts a
  // jpeg_finish_decompress that runs out of data), so a missing EOI marker after the last row is no error.
  if (cinfo.output_scanline < cinfo.output_height) ERREXIT(&cinfo, JERR_TOO_LITTLE_DATA);
}

// Runs f(job, args...) under the error handler; false when libjpeg reported an error (job.message).
template <typename... Args>
bool jpeg_step(JpegJob& job, void (*f)(JpegJob&, Args...), Args... args) {
  if (setjmp(job.jump)) return false;
  f(job, args...);
  return true;
}

// The denominator d (1, 2, 4 or 8) of the smallest 1/d scale whose shorter side, ceil(side / d), is >= min_side.
unsigned jpeg_scale_denominator(int64_t width, int64_t height, int64_t min_side) {
  if (min_side <= 0) return 1;
  const int64_t shorter = std::min(width, height);
  for (unsigned d : {8u, 4u, 2u}) {
    if ((shorter + d - 1) / d >= min_side) return d;
  }
  return 1;
}

DecodedImage decode_jpeg(const uint8_t* bytes, size_t size, const DecodeOptions& options) {
  auto job = std::make_unique<JpegJob>();
  struct Destroy {
    JpegJob& job;
    ~Destroy() {
      if (job.created) jpeg_destroy_decompress(&job.cinfo);
    }
  } destroy{*job};
  const auto error = [&job] {
    if (std::strcmp(job->message, kJpegTruncated) == 0) fail(job->message);
    fail(std::string("invalid JPEG: ") + job->message);
  };
  if (!jpeg_step(*job, jpeg_open, bytes, size)) error();
  jpeg_decompress_struct& cinfo = job->cinfo;
  check_image_size(cinfo.image_width, cinfo.image_height, options);
  // Pillow's modes by component count (JpegImagePlugin.SOF): 1 L, 3 RGB, 4 CMYK; libjpeg refuses other counts.
  cinfo.out_color_space = cinfo.num_components == 4 ? JCS_CMYK : JCS_RGB;
  // Pillow's decoder (libImaging/JpegDecode.c) keeps libjpeg's defaults, also after draft() (decoderconfig
  // (scale, 0): no draft flag, so no JDCT_FASTEST / no fancy-upsampling switch-off).
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  DecodeRegion region;
  if (options.plan) {
    region = options.plan(cinfo.image_height, cinfo.image_width);
    if (region.scale != 1 && region.scale != 2 && region.scale != 4 && region.scale != 8)
      fail("JPEG scale 1/" + std::to_string(region.scale) + " asked for: 1, 2, 4 or 8 only");
  } else {
    region.scale = jpeg_scale_denominator(cinfo.image_width, cinfo.image_height, options.min_side);
  }
  cinfo.scale_num = 1;
  cinfo.scale_denom = region.scale;
  jpeg_calc_output_dimensions(&cinfo);  // no allocation; the sizes jpeg_start_decompress will use
  const int64_t full_height = cinfo.output_height, full_width = cinfo.output_width;
  if (region.height > 0) {
    region.top = std::clamp<int64_t>(region.top, 0, full_height - 1);
    region.left = std::clamp<int64_t>(region.left, 0, full_width - 1);
    region.height = std::min(region.height, full_height - region.top);
    region.width = std::min(region.width, full_width - region.left);
  } else {
    region = {region.scale, 0, 0, full_height, full_width};
  }
  job->top = static_cast<JDIMENSION>(region.top);
  job->rows = static_cast<JDIMENSION>(region.height);
  // Two more columns each side: fancy upsampling of a column reads its neighbours' chroma, which the decoded columns'
  // edges lack; so the region's own columns come out as in a whole decode.
  const int64_t left = std::max<int64_t>(0, region.left - 2);
  job->left = static_cast<JDIMENSION>(left);
  job->width = static_cast<JDIMENSION>(std::min(full_width, region.left + region.width + 2) - left);
  if (!jpeg_step(*job, jpeg_start)) error();
  DecodedImage image;
  image.scale = region.scale;
  image.full_height = cinfo.image_height;
  image.full_width = cinfo.image_width;
  image.top = region.top;
  image.left = job->width < static_cast<JDIMENSION>(full_width) ? job->left : 0;
  image.width = cinfo.output_width;  // the region's iMCU columns after jpeg_crop_scanline
  image.height = region.height;
  image.rgb.resize(static_cast<size_t>(image.width * image.height * 3));
  job->out = image.rgb.data();
  if (!jpeg_step(*job, jpeg_read_rows)) error();
  return image;
}

// ---- PNG ----

struct PngJob {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::jmp_buf jump;
  char message[256] = {};
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  bool truncated = false;
  // What png_convert_row needs: the image, its format and palette, and how many (sub-image) rows it has converted.
  uint8_t* rgb = nullptr;
  size_t width = 0, height = 0, rows_done = 0;
  int color = 0, depth = 0;
  bool interlaced = false;
  uint8_t palette[256 * 3] = {};  // Pillow's palette is black past the PLTE's entries (and without a PLTE)
};

void png_error_fn(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof job->message, "%s", message);
  std::longjmp(job->jump, 1);
}

void png_warning_fn(png_structp, png_const_charp) {}

void png_read_fn(png_structp png, png_bytep out, size_t length) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (length > job->size - job->pos) {
    job->truncated = true;
    png_error(png, "premature end of data");
  }
  std::memcpy(out, job->data + job->pos, length);
  job->pos += length;
}

// One row of libpng's output (after png_set_transforms) to RGB pixels `step` bytes apart, as Pillow's rawmodes and
// convert("RGB") do (PngImagePlugin._MODES).
void png_row_to_rgb(const PngJob& job, const uint8_t* in, size_t n, uint8_t* out, size_t step) {
  if (job.color == PNG_COLOR_TYPE_RGB || job.color == PNG_COLOR_TYPE_RGB_ALPHA) {
    for (size_t i = 0; i < n; ++i, out += step) std::memcpy(out, in + 3 * i, 3);
  } else if (job.color == PNG_COLOR_TYPE_PALETTE) {
    for (size_t i = 0; i < n; ++i, out += step) std::memcpy(out, job.palette + 3 * in[i], 3);
  } else {
    const bool gray16 = job.color == PNG_COLOR_TYPE_GRAY && job.depth == 16;
    // modes 1, L;2, L;4: x255, x85, x17; 8-bit gray and gray+alpha (16 bits cut, Pillow's LA;16B): as is
    const int scale = job.color == PNG_COLOR_TYPE_GRAY && job.depth < 8 ? 255 / ((1 << job.depth) - 1) : 1;
    for (size_t i = 0; i < n; ++i, out += step) {
      // I;16 to RGB clips to 255 (libImaging/Convert.c I16_RGB)
      const uint8_t v = gray16 ? (in[2 * i] ? 255 : in[2 * i + 1]) : static_cast<uint8_t>(in[i] * scale);
      out[0] = out[1] = out[2] = v;
    }
  }
}

// libpng's user transform, the last step of every row it decodes: converts the row into the image (an Adam7 pass's
// row into its pixels).
void png_convert_row(png_structp png, png_row_infop row_info, png_bytep data) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  const int pass = job->interlaced ? png_get_current_pass_number(png) : 0;
  const size_t row = png_get_current_row_number(png);
  const size_t y = job->interlaced ? PNG_ROW_FROM_PASS_ROW(row, pass) : row;
  const size_t x0 = job->interlaced ? PNG_PASS_START_COL(pass) : 0;
  const size_t dx = job->interlaced ? size_t{1} << PNG_PASS_COL_SHIFT(pass) : 1;
  if (y >= job->height || x0 >= job->width) return;
  const size_t n = std::min<size_t>(row_info->width, (job->width - x0 + dx - 1) / dx);
  png_row_to_rgb(*job, data, n, job->rgb + (y * job->width + x0) * 3, dx * 3);
  ++job->rows_done;
}

// Reads the signature, IHDR and every chunk up to the first IDAT.
void png_open(PngJob& job) {
  png_set_read_fn(job.png, &job, png_read_fn);
  png_set_user_limits(job.png, 0x7fffffff, 0x7fffffff);  // data.max_image_pixels limits the size instead
  // Pillow checks the CRC of every chunk before the first IDAT (PngStream.crc): a bad one is an error, ancillary
  // chunks' included; libpng's default only warns about those.
  png_set_crc_action(job.png, PNG_CRC_DEFAULT, PNG_CRC_ERROR_QUIT);
  // Ancillary chunks change nothing here (Pillow applies no gamma, colour profile or background): skip them unparsed.
  png_set_keep_unknown_chunks(job.png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_read_info(job.png, job.info);
  // Pillow never checks the CRC of image data (PngImageFile.load_read skips it).
  png_set_crc_action(job.png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
}

// Samples of 1, 2 or 4 bits one per byte (unscaled), 16 bits cut to their high byte (not 16-bit gray, which Pillow
// clips), alpha dropped; then png_convert_row. No interlace handling: rows come pass by pass, as sub-images.
void png_set_transforms(PngJob& job) {
  if (job.depth < 8) png_set_packing(job.png);
  if (job.depth == 16 && job.color != PNG_COLOR_TYPE_GRAY) png_set_strip_16(job.png);
  if (job.color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(job.png);
  png_set_read_user_transform_fn(job.png, png_convert_row);
  png_read_update_info(job.png, job.info);
}

void png_read_rows(PngJob& job, size_t rows) {
  for (size_t i = 0; i < rows; ++i) png_read_row(job.png, nullptr, nullptr);
}

template <typename... Args>
bool png_step(PngJob& job, void (*f)(PngJob&, Args...), Args... args) {
  if (setjmp(job.jump)) return false;
  f(job, args...);
  return true;
}

DecodedImage decode_png(const uint8_t* bytes, size_t size, const DecodeOptions& options) {
  auto job = std::make_unique<PngJob>();
  job->data = bytes;
  job->size = size;
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job.get(), png_error_fn, png_warning_fn);
  if (job->png) job->info = png_create_info_struct(job->png);
  struct Destroy {
    PngJob& job;
    ~Destroy() { png_destroy_read_struct(&job.png, job.info ? &job.info : nullptr, nullptr); }
  } destroy{*job};
  if (!job->png || !job->info) throw std::bad_alloc();
  const auto error = [&job] {
    if (job->truncated) fail("truncated PNG (premature end of data)");
    fail(std::string("invalid PNG: ") + job->message);
  };
  if (!png_step(*job, png_open)) error();
  job->width = png_get_image_width(job->png, job->info);
  job->height = png_get_image_height(job->png, job->info);
  check_image_size(job->width, job->height, options);
  if (options.plan) options.plan(static_cast<int64_t>(job->height), static_cast<int64_t>(job->width));
  job->color = png_get_color_type(job->png, job->info);
  job->depth = png_get_bit_depth(job->png, job->info);
  job->interlaced = png_get_interlace_type(job->png, job->info) != PNG_INTERLACE_NONE;
  png_colorp entries = nullptr;
  int count = 0;
  if (png_get_PLTE(job->png, job->info, &entries, &count)) {
    for (int i = 0; i < std::min(count, 256); ++i) {
      uint8_t* p = job->palette + 3 * i;
      p[0] = entries[i].red, p[1] = entries[i].green, p[2] = entries[i].blue;
    }
  }
  if (!png_step(*job, png_set_transforms)) error();
  size_t rows = job->height;  // rows png_read_row delivers: every pass's rows, passes without columns skipped
  if (job->interlaced) {
    rows = 0;
    for (int pass = 0; pass < 7; ++pass) {
      if (PNG_PASS_COLS(job->width, pass) > 0) rows += PNG_PASS_ROWS(job->height, pass);
    }
  }
  DecodedImage image;
  image.width = static_cast<int64_t>(job->width);
  image.height = static_cast<int64_t>(job->height);
  image.full_width = image.width;
  image.full_height = image.height;
  image.rgb.resize(job->width * job->height * 3);
  job->rgb = image.rgb.data();
  // Once every row is decoded the image is complete: Pillow reads nothing more (not the rest of the zlib stream,
  // its checksum, the IDAT CRC or IEND), so what goes wrong after that (a file cut there) is no error either. (libpng
  // reads image data a chunk's worth at a time: a file cut inside the zlib stream's last bytes, its Adler-32, fails
  // before the last row, where Pillow's decoder still gets every row.)
  if (!png_step(*job, png_read_rows, rows) && job->rows_done < rows) error();
  return image;
}

std::string hex_bytes(const uint8_t* bytes, size_t size) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) {
    std::snprintf(buf, sizeof buf, i ? " %02X" : "%02X", bytes[i]);
    out += buf;
  }
  return out;
}

}  // namespace

DecodedImage decode_image(const uint8_t* bytes, size_t size, const DecodeOptions& options) {
  static const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size == 0) fail("empty file");
  if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return decode_jpeg(bytes, size, options);
  if (size >= 8 && std::memcmp(bytes, kPngSignature, 8) == 0) return decode_png(bytes, size, options);
  fail("not a JPEG or PNG image (its first bytes, " + hex_bytes(bytes, size) +
       ", are neither JPEG's FF D8 FF nor PNG's signature)");
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::vector<uint8_t> bytes;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) fail(path + ": cannot open: " + std::strerror(errno));
  uint8_t buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) bytes.insert(bytes.end(), buffer, buffer + n);
  if (std::ferror(file.get())) fail(path + ": cannot read: " + std::strerror(errno));
  return bytes;
}

DecodedImage decode_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                               const DecodeOptions& options) {
  try {
    return decode_image(bytes.data(), bytes.size(), options);
  } catch (const std::runtime_error& e) {
    fail(path + ": " + e.what());
  }
}

DecodedImage read_image(const std::string& path, const DecodeOptions& options) {
  return decode_file_bytes(path, read_file_bytes(path), options);
}

}  // namespace ddp
