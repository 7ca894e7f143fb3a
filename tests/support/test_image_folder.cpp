// write_mixed_image_folder: JPEGs from encode_test_jpeg and the fuzz corpus's PNG, named by kind.
#include "tests/support/test_image_folder.h"

#include "tests/support/test_jpeg.h"
#include "tests/support/test_support.h"

#include <filesystem>

namespace ddp::test {

void write_mixed_image_folder(const std::string& root, int copies) {
  using Colour = TestJpeg::Colour;
  const std::string png = read_file(source_dir() + "/tests/fuzz/corpus/image_decode/rgb_9x7.png");
  for (const char* split : {"train", "val"}) {
    for (int copy = 0; copy < copies; ++copy) {
      const std::string a = root + "/" + split + "/a/", b = root + "/" + split + "/b/", n = std::to_string(copy);
      std::filesystem::create_directories(a);
      std::filesystem::create_directories(b);
      auto jpeg = [&](const std::string& path, int width, int height, int seed, auto edit) {
        TestJpeg j;
        j.width = width, j.height = height, j.seed = seed + 10 * copy;
        edit(j);
        write_file(path, encode_test_jpeg(j));
      };
      jpeg(a + n + "_gpu_baseline.jpg", 40, 30, 1, [](TestJpeg&) {});
      write_file(a + n + "_cpu_png.png", png);
      jpeg(a + n + "_cpu_cmyk.jpg", 36, 28, 2, [](TestJpeg& j) { j.colour = Colour::Cmyk; });
      jpeg(a + n + "_gpu_progressive.jpg", 44, 30, 3, [](TestJpeg& j) { j.progressive = true; });
      jpeg(b + n + "_cpu_arithmetic.jpg", 30, 26, 4, [](TestJpeg& j) { j.arithmetic = true; });
      jpeg(b + n + "_gpu_gray.jpg", 33, 29, 5, [](TestJpeg& j) { j.colour = Colour::Gray; });
      jpeg(b + n + "_gpu_444.jpg", 27, 30, 6, [](TestJpeg& j) { j.luma_h = j.luma_v = 1; });
      jpeg(b + n + "_gpu_restarts.jpg", 50, 24, 7, [](TestJpeg& j) { j.restart_rows = 1; });
    }
  }
}

bool decoded_on_device(const std::string& path) {
  return std::filesystem::path(path).filename().string().find("_gpu_") != std::string::npos;
}

Config mixed_image_folder_config(const std::string& root, const std::vector<std::string>& keys) {
  std::vector<std::string> all = {"data.dataset=image_folder", "data.dir=" + root, "model.name=resnet18",
                                  "data.image_size=16"};
  all.insert(all.end(), keys.begin(), keys.end());
  return parse_config("", "f.toml", all);
}

}  // namespace ddp::test
