// The transform list of a class-folder split: built from the config in torchvision's presets order and printed so; a
// device decode gets the draws the CPU path makes (crop, flip, erased box), and only when it can apply every op.
#include "data/sample_transforms.h"

#include "config/config.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/image_transforms.h"
#include "data/jpeg_header.h"
#include "tests/support/test_image_folder.h"
#include "tests/support/test_support.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ddp::test {
namespace {

TEST(SampleTransforms, ListFollowsTheConfigInTorchvisionsOrder) {
  std::vector<std::string> names;
  for (const PixelTransformRow* row : pixel_transform_rows()) names.emplace_back(row->name);
  EXPECT_EQ(names, (std::vector<std::string>{"horizontal_flip", "auto_augment", "color_jitter", "random_erasing"}));

  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const Config plain = mixed_image_folder_config(dir / "f");
  EXPECT_EQ(SampleTransforms(plain.data, true).describe(),
            "RandomResizedCrop(16, bilinear) → RandomHorizontalFlip(p=0.5)");
  EXPECT_EQ(SampleTransforms(plain.data, false).describe(), "Resize(18, bilinear) → CenterCrop(16)");
  EXPECT_TRUE(SampleTransforms(plain.data, true).runs_on_device());

  // Keys in any order in the config; the list in torchvision's: crop, flip, policy, ColorJitter, RandomErasing.
  const Config all = mixed_image_folder_config(
      dir / "f", {"data.random_erase=0.25", "data.jitter_hue=0.1", "data.auto_augment=rand_augment",
                  "data.jitter_brightness=0.4", "data.ra_num_ops=3", "data.interpolation=bicubic"});
  EXPECT_EQ(SampleTransforms(all.data, true).describe(),
            "RandomResizedCrop(16, bicubic) → RandomHorizontalFlip(p=0.5) → RandAugment(num_ops=3, magnitude=9) → "
            "ColorJitter(brightness=(0.6, 1.4), hue=(-0.1, 0.1)) → RandomErasing(p=0.25, after Normalize)");
  EXPECT_EQ(SampleTransforms(all.data, false).describe(), "Resize(18, bicubic) → CenterCrop(16)");
  EXPECT_FALSE(SampleTransforms(all.data, true).runs_on_device());
  EXPECT_TRUE(SampleTransforms(all.data, false).runs_on_device());
  // An op no device applies keeps the split on the loader threads; erasing alone does not.
  const Config jitter = mixed_image_folder_config(dir / "f", {"data.jitter_saturation=0.5"});
  EXPECT_FALSE(SampleTransforms(jitter.data, true).runs_on_device());
  EXPECT_EQ(SampleTransforms(jitter.data, true).describe(),
            "RandomResizedCrop(16, bilinear) → RandomHorizontalFlip(p=0.5) → ColorJitter(saturation=(0.5, 1.5))");
  const Config erase = mixed_image_folder_config(dir / "f", {"data.random_erase=0.5"});
  EXPECT_TRUE(SampleTransforms(erase.data, true).runs_on_device());
  const Config policy =
      mixed_image_folder_config(dir / "f", {"data.auto_augment=ta_wide", "data.auto_augment_interpolation=bilinear"});
  EXPECT_EQ(SampleTransforms(policy.data, true).describe(),
            "RandomResizedCrop(16, bilinear) → RandomHorizontalFlip(p=0.5) → "
            "TrivialAugmentWide(interpolation=bilinear)");
}

// A training sample never stays a view of its decoded image, which is freed when the transform returns: where the
// drawn crop is already of the output size (no resize), and elsewhere, the sample owns its pixels.
TEST(SampleTransforms, ATrainingSampleOwnsItsPixelsAlsoWhenItsCropNeedsNoResize) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const Config cfg = mixed_image_folder_config(dir / "f", {"data.train_crop_size=3"});
  const SampleTransforms transforms(cfg.data, true);
  const std::string png = read_file(source_dir() + "/tests/fuzz/corpus/image_decode/rgb_9x7.png");
  const std::vector<uint8_t> bytes(png.begin(), png.end());
  int unresized = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const CropBox box = random_resized_crop_box(7, 9, CropRanges{}, gen);  // the transform's first draw
    unresized += box.height == 3 && box.width == 3;
    const TransformedSample sample = transforms("rgb_9x7.png", bytes, seed);
    ASSERT_EQ(sample.image.sizes(), (std::vector<int64_t>{3, 3, 3})) << "seed " << seed;
    // Pixels the tensor owns come from an allocator, which keeps a context to free them by; a view of another
    // buffer (torch::from_blob, no deleter) has none.
    EXPECT_NE(sample.image.storage().data_ptr().get_context(), nullptr) << "seed " << seed;
  }
  EXPECT_GT(unresized, 0) << "no crop of the output size drawn: the case is not tested";
}

// An evaluation sample owns its pixels too: where the image already has the resize's size (the center crop a view of
// the decoded image) and where it is resized.
TEST(SampleTransforms, AnEvaluationSampleOwnsItsPixelsWithAndWithoutAResize) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const std::string png = read_file(source_dir() + "/tests/fuzz/corpus/image_decode/rgb_9x7.png");
  const std::vector<uint8_t> bytes(png.begin(), png.end());
  for (const std::string resize : {"7", "5"}) {  // the 9x7 image's shorter side: no resize; then a resize
    const Config cfg = mixed_image_folder_config(dir / "f", {"data.val_resize_size=" + resize, "data.val_crop_size=3"});
    const TransformedSample sample = SampleTransforms(cfg.data, false)("rgb_9x7.png", bytes, 0);
    ASSERT_EQ(sample.image.sizes(), (std::vector<int64_t>{3, 3, 3})) << "resize " << resize;
    EXPECT_NE(sample.image.storage().data_ptr().get_context(), nullptr) << "resize " << resize;
  }
}

// For every JPEG of a folder and many seeds: the draws for the device equal the CPU path's (the erased box exactly,
// the crop and flip through the device's transform of the whole decode: within 1 of the CPU's pixels, its float32
// resize against the CPU's uint8 one); evaluation draws nothing.
TEST(SampleTransforms, DeviceDrawsAreTheCpuPathsDraws) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const Config cfg = mixed_image_folder_config(dir / "f", {"data.random_erase=0.5"});
  int boxes = 0, flips = 0, draws = 0;
  for (const bool train : {true, false}) {
    const SampleTransforms transforms(cfg.data, train);
    for (const std::string& path : list_image_folder(dir / (train ? "f/train" : "f/val")).paths) {
      if (!decoded_on_device(path)) continue;
      const std::vector<uint8_t> bytes = read_file_bytes(path);
      const JpegFrame frame = *parse_jpeg_frame(bytes.data(), bytes.size());
      const DecodedImage whole = read_image(path, {});
      const torch::Tensor image =
          torch::from_blob(const_cast<uint8_t*>(whole.rgb.data()), {whole.height, whole.width, 3}, torch::kUInt8)
              .permute({2, 0, 1});
      for (uint64_t seed = 0; seed < 24; ++seed) {
        SCOPED_TRACE(path + " seed " + std::to_string(seed));
        const TransformedSample cpu = transforms(path, bytes, seed);
        const DeviceDraw device = transforms.draw_for_device(frame.height, frame.width, seed);
        EXPECT_EQ(device.transform.train, train);
        EXPECT_EQ(device.erase.has_value(), cpu.erase.has_value());
        if (device.erase && cpu.erase) {
          EXPECT_EQ(*device.erase, *cpu.erase);
        }
        const torch::Tensor got = apply_device_transform(image, device.transform).round().to(torch::kUInt8);
        ASSERT_EQ(got.sizes(), cpu.image.sizes());
        EXPECT_LE((got.to(torch::kInt) - cpu.image.to(torch::kInt)).abs().max().item<int>(), 1);
        ++draws;
        boxes += cpu.erase ? 1 : 0;
        flips += device.transform.flip ? 1 : 0;
        if (!train) {
          EXPECT_FALSE(cpu.erase.has_value());
        }
      }
    }
  }
  EXPECT_EQ(draws, 2 * 5 * 24);
  EXPECT_GT(boxes, 5 * 24 / 4);  // boxes were drawn and compared, not only whole images
  EXPECT_GT(flips, 5 * 24 / 4);
}

}  // namespace
}  // namespace ddp::test
