// Image decoding for image_folder: JPEG and PNG files to RGB bytes as Pillow's Image.open(p).convert("RGB") gives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace ddp {

// What part of a JPEG to decode: its 1/scale size (1, 2, 4 or 8), and in that the region of rows [top, top + height)
// and columns [left, left + width) (height 0: the whole image).
struct DecodeRegion {
  unsigned scale = 1;
  int64_t top = 0, left = 0, height = 0, width = 0;
};

struct DecodeOptions {
  // PIL's Image.MAX_IMAGE_PIXELS: a header announcing more pixels (width * height) is refused before any pixel
  // buffer is allocated; 0 or less: no limit (as MAX_IMAGE_PIXELS = None).
  int64_t max_pixels = 89478485;
  // JPEG only: decode at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling, scale_num / scale_denom), choosing the
  // smallest scale whose shorter side is still >= min_side; 0 = always full size. Each side of a 1/d decode is
  // ceil(side / d), as Pillow's im.draft("RGB", ...) gives it.
  int64_t min_side = 0;
  // Called once the header is read, with the image's full size, before any pixel is decoded (a training crop is
  // drawn from it). For a JPEG its answer replaces min_side's choice of scale and may name the only region needed:
  // then only the rows of the region go through the inverse DCT and colour conversion, and only the columns of the
  // iMCUs it touches (libjpeg-turbo's jpeg_skip_scanlines and jpeg_crop_scanline); the rows after it are still
  // entropy-decoded, so a truncated file is an error wherever it is cut. A PNG is decoded whole, at full size.
  std::function<DecodeRegion(int64_t height, int64_t width)> plan;
};

// std::allocator that leaves a resized vector's new bytes uninitialised: a decoder writes every pixel, so zeroing
// them first would be a pass over the image for nothing.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;  // default-initialised: no value for a byte
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

struct DecodedImage {
  int64_t height = 0, width = 0;
  // height * width * 3 bytes, rows top to bottom, R G B per pixel
  std::vector<uint8_t, UninitializedAllocator<uint8_t>> rgb;
  unsigned scale = 1;         // decoded at 1/scale of the full size (JPEG's DCT scaling)
  int64_t full_height = 0, full_width = 0;  // the size the header gives, before 1/scale and any region
  int64_t top = 0, left = 0;  // where these pixels lie in the 1/scale image (a region decoded alone), else 0, 0
};

// Decodes a JPEG or PNG image (recognised by its first bytes, never by a file name). Throws std::runtime_error with a
// one-line message saying what is wrong: "empty file", "not a JPEG or PNG image (...)", "truncated JPEG (premature end
// of data)", "image of 65000x65000 = 4225000000 pixels exceeds data.max_image_pixels = 89478485", ...
//
// As Pillow: grayscale JPEG gives R = G = B; CMYK/YCCK JPEG is read as Adobe's inverted CMYK and converted with
// Pillow's cmyk2rgb; libjpeg's defaults (accurate integer IDCT, fancy upsampling), which Pillow's decoder keeps.
// PNG: gray of 1, 2 and 4 bits scaled to 0..255 (x255, x85, x17), 16-bit gray clipped to 0..255 (Pillow's I;16 to
// RGB), other 16-bit samples cut to their high byte, alpha and tRNS dropped (never composited), palette indices past
// the PLTE's entries black, gamma and colour chunks not applied. A JPEG or PNG whose data ends before its last row is
// an error ("truncated ..."); what follows the last row is not read, as Pillow does not read it either.
DecodedImage decode_image(const uint8_t* bytes, size_t size, const DecodeOptions& options);

// Reads the file and decodes it; every error message starts with "<path>: ".
DecodedImage read_image(const std::string& path, const DecodeOptions& options);

// read_image in two steps: the file's bytes (errors "<path>: cannot open: ...", "<path>: cannot read: ..."), then
// their decoding (errors "<path>: " and decode_image's message).
std::vector<uint8_t> read_file_bytes(const std::string& path);
DecodedImage decode_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                               const DecodeOptions& options);

}  // namespace ddp
