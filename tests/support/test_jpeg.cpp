// encode_test_jpeg: libjpeg-turbo's compressor into memory, set up from a TestJpeg.
#include "tests/support/test_jpeg.h"

#include <cstdio>  // before jpeglib.h, which uses FILE
#include <jpeglib.h>

#include <cstdlib>
#include <vector>

namespace ddp::test {

std::string encode_test_jpeg(const TestJpeg& spec) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr errors;
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_mem_dest(&cinfo, &out, &out_size);
  const bool four = spec.colour == TestJpeg::Colour::Cmyk || spec.colour == TestJpeg::Colour::Ycck;
  const int components = spec.colour == TestJpeg::Colour::Gray ? 1 : four ? 4 : 3;
  cinfo.image_width = static_cast<JDIMENSION>(spec.width);
  cinfo.image_height = static_cast<JDIMENSION>(spec.height);
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : four ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  if (spec.colour == TestJpeg::Colour::Rgb) jpeg_set_colorspace(&cinfo, JCS_RGB);
  if (spec.colour == TestJpeg::Colour::Ycck) jpeg_set_colorspace(&cinfo, JCS_YCCK);
  if (components == 3 && spec.colour == TestJpeg::Colour::YCbCr) {
    cinfo.comp_info[0].h_samp_factor = spec.luma_h;
    cinfo.comp_info[0].v_samp_factor = spec.luma_v;
    for (int c = 1; c < 3; ++c) {
      cinfo.comp_info[c].h_samp_factor = spec.chroma_h;
      cinfo.comp_info[c].v_samp_factor = spec.chroma_v;
    }
  }
  jpeg_set_quality(&cinfo, spec.quality, spec.force_baseline ? TRUE : FALSE);
  cinfo.arith_code = spec.arithmetic ? TRUE : FALSE;
  cinfo.optimize_coding = spec.optimize ? TRUE : FALSE;
  cinfo.restart_in_rows = spec.restart_rows;
  if (spec.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<JSAMPLE> row(static_cast<size_t>(spec.width * components));
  while (cinfo.next_scanline < cinfo.image_height) {
    const int y = static_cast<int>(cinfo.next_scanline);
    for (int x = 0; x < spec.width; ++x)
      for (int c = 0; c < components; ++c)
        row[static_cast<size_t>(x * components + c)] =
            static_cast<JSAMPLE>((x * (7 + spec.seed % 5) + y * (5 + c) + c * 60 + spec.seed * 37) % 256);
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string bytes(reinterpret_cast<const char*>(out), out_size);
  std::free(out);
  return bytes;
}

}  // namespace ddp::test
