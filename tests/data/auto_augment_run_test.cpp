// data.auto_augment and data.random_erase in the image folder's loader and in a run: the same batches for any number
// of loader threads, erased boxes zeroed after normalisation (or carried with a uint8 batch to the device, with the
// same boxes where the device decodes), a run bit-identical across data.workers, and the keys refused elsewhere.
#include "config/config.h"
#include "config/key_walk.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/support/test_image_folder.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

struct AugmentedEpoch {
  torch::Tensor images;
  std::vector<std::vector<RowErasure>> erasures;  // by batch
  int64_t device_rows = 0;                        // rows left for the device to decode
};

AugmentedEpoch augmented_epoch(const Split& split, int64_t workers, bool normalize, bool device_decode) {
  LoaderOptions o;
  o.batch_size = 4;
  o.workers = workers;
  o.seed = 5;
  o.epoch = 1;
  o.mean = {0.5};
  o.std = {0.25};
  o.normalize = normalize;
  o.device_decode = device_decode;
  std::vector<int64_t> indices(static_cast<size_t>(split.size()));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  BatchLoader loader(split, indices, o);
  AugmentedEpoch out;
  std::vector<torch::Tensor> images;
  while (auto b = loader.next()) {
    images.push_back(b->images.clone());
    out.erasures.push_back(b->erasures);
    if (b->device_rows)
      for (const auto& r : b->device_rows->rows) out.device_rows += r != nullptr;
  }
  out.images = torch::cat(images);
  return out;
}

bool augment_same_erasures(const std::vector<std::vector<RowErasure>>& a,
                           const std::vector<std::vector<RowErasure>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (size_t k = 0; k < a[i].size(); ++k)
      if (a[i][k].row != b[i][k].row || !(a[i][k].box == b[i][k].box)) return false;
  }
  return true;
}

TEST(AutoAugmentLoader, BatchesDoNotDependOnWorkersAndErasedBoxesAreZero) {
  TempDir dir;
  write_mixed_image_folder(dir / "f", 2);
  const Config plain = mixed_image_folder_config(dir / "f");
  const Config cfg = mixed_image_folder_config(dir / "f", {"data.auto_augment=ta_wide", "data.random_erase=0.5"});
  const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
  const Dataset plain_ds = load_dataset(plain.data, plain.model, 0, {});
  const AugmentedEpoch one = augmented_epoch(ds.train, 1, true, false);
  EXPECT_TRUE(torch::equal(one.images, augmented_epoch(ds.train, 2, true, false).images));
  EXPECT_TRUE(torch::equal(one.images, augmented_epoch(ds.train, 0, true, false).images));
  // The same crops and flips as without them (their draws come first), then the policy and the boxes.
  const AugmentedEpoch standard = augmented_epoch(plain_ds.train, 2, true, false);
  EXPECT_FALSE(torch::equal(one.images, standard.images));
  // Normalised here: the boxes are zeroed in the rows and none is left to the device.
  for (const auto& b : one.erasures) EXPECT_TRUE(b.empty());
  int64_t rows_with_zero_boxes = 0;
  const AugmentedEpoch raw = augmented_epoch(ds.train, 2, false, false);
  int64_t boxes = 0;
  for (size_t b = 0; b < raw.erasures.size(); ++b)
    for (const RowErasure& e : raw.erasures[b]) {
      ++boxes;
      const torch::Tensor row = one.images[static_cast<int64_t>(b) * 4 + e.row];
      rows_with_zero_boxes +=
          torch::equal(row.slice(1, e.box.top, e.box.top + e.box.height).slice(2, e.box.left, e.box.left + e.box.width),
                       torch::zeros({3, e.box.height, e.box.width}));
    }
  EXPECT_GT(boxes, 4);  // 32 samples at p = 0.5
  EXPECT_EQ(rows_with_zero_boxes, boxes);
  // uint8 batches carry the boxes; normalising and erasing them on the "device" gives the CPU's rows.
  torch::Tensor on_device = raw.images.to(torch::kFloat32).div(255).sub(0.5).div(0.25);
  for (size_t b = 0; b < raw.erasures.size(); ++b)
    erase_rows(on_device.narrow(0, static_cast<int64_t>(b) * 4, 4), raw.erasures[b]);
  // Both sides take level / 255 (ATen may multiply by the reciprocal: within 2u of y = level / 255 <= 1; the loader's
  // table divides: within u), subtract 0.5 (exact for y >= 0.25, else within 2^-26) and divide by 0.25 (exact), u =
  // 2^-24: 4 (3u + 2 * 2^-26) = 8.4e-7 apart at most. Neighbouring levels are 1 / (255 * 0.25) = 0.016 apart.
  EXPECT_TRUE(torch::allclose(on_device, one.images, 0, 1e-6));
  // data.decode = "gpu": with a policy every sample is decoded here (same pixels, same boxes); with erasing alone the
  // device's rows carry the boxes the CPU path draws.
  const AugmentedEpoch device = augmented_epoch(ds.train, 2, false, true);
  EXPECT_EQ(device.device_rows, 0);
  EXPECT_TRUE(torch::equal(device.images, raw.images));
  EXPECT_TRUE(augment_same_erasures(device.erasures, raw.erasures));
  const Config erase_only = mixed_image_folder_config(dir / "f", {"data.random_erase=0.5"});
  const Dataset erase_ds = load_dataset(erase_only.data, erase_only.model, 0, {});
  const AugmentedEpoch erase_device = augmented_epoch(erase_ds.train, 2, false, true);
  EXPECT_GT(erase_device.device_rows, 0);
  EXPECT_TRUE(augment_same_erasures(erase_device.erasures, augmented_epoch(erase_ds.train, 1, false, false).erasures));
  // Evaluation is never augmented.
  EXPECT_TRUE(torch::equal(augmented_epoch(ds.test, 1, true, false).images,
                           augmented_epoch(plain_ds.test, 1, true, false).images));
}

// A short run with TrivialAugmentWide, ColorJitter and RandomErasing trains, names its transforms in order in the
// banner, and gives the same weights to the bit with one loader thread or two.
TEST(AutoAugmentRun, TrainsAndIsBitIdenticalAcrossWorkers) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  auto run = [&](const std::string& workers) {
    const std::string out = dir / ("out" + workers);
    const std::string cfg = write_mnist_job(
        dir, dir / "f",
        {"model.name=resnet18", "data.image_size=16", "data.batch_size=4", "data.workers=" + workers,
         "data.auto_augment=ta_wide", "data.random_erase=0.25", "data.jitter_contrast=0.3", "data.jitter_hue=0.05",
         "optimizer.lr=0.05", "training.epochs=2", "job.seed=4", "job.out_dir=" + out, "metrics.progress=plain"});
    const auto ranks = run_ranks(1, cfg + " --data.dataset=image_folder");
    EXPECT_EQ(ranks[0].exit_code, 0) << ranks[0].output;
    EXPECT_NE(ranks[0].output.find("\n  transforms train RandomResizedCrop(16, bilinear) → RandomHorizontalFlip(p=0.5) "
                                   "→ TrivialAugmentWide() → ColorJitter(contrast=(0.7, 1.3), hue=(-0.05, 0.05)) → "
                                   "RandomErasing(p=0.25, after Normalize) | test Resize(18, bilinear) → "
                                   "CenterCrop(16)\n"),
              std::string::npos)
        << ranks[0].output;
    return out + "/model.pt";
  };
  const std::string one = run("1"), two = run("2");
  EXPECT_EQ(max_state_diff(one, two), 0.0);
}

TEST(AutoAugmentConfig, KeysOutsideTheImageFolderStandardTransformAreRefused) {
  TempDir dir;
  const std::string cfg = write_tiny_job(dir, 8, 4, 1, {"data.auto_augment=ta_wide", "job.out_dir=" + dir / "out"});
  const CommandResult r = run_command(shell_quote(ddptrain_path()) + " " + shell_quote(cfg));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.auto_augment applies to the training transform of datasets \"image_folder\" and "
                          "\"webdataset\" only, not data.dataset = \"mnist\""),
            std::string::npos)
      << r.output;
  auto error = [](const std::vector<std::string>& keys) { return error_of([&] { parse_config("", "f.toml", keys); }); };
  EXPECT_NE(error({"data.random_erase=0.5"}).find("data.random_erase applies to the training transform"),
            std::string::npos);
  EXPECT_NE(error({"data.jitter_brightness=0.5"}).find("data.jitter_brightness applies to the training transform"),
            std::string::npos);
  EXPECT_NE(error({"data.jitter_hue=0.6"}).find("data.jitter_hue"), std::string::npos);  // hue shifts: at most 0.5
  write_mixed_image_folder(dir / "f");
  const std::string folder = "data.dir=" + dir / "f";
  const std::vector<std::string> base = {"data.dataset=image_folder", folder, "model.name=resnet18"};
  auto with = [&](std::vector<std::string> keys) {
    keys.insert(keys.begin(), base.begin(), base.end());
    return error(keys);
  };
  EXPECT_NE(with({"data.augment=none", "data.auto_augment=augmix"})
                .find("data.auto_augment applies to the standard training transform"),
            std::string::npos);
  EXPECT_NE(with({"data.augment=none", "data.jitter_saturation=0.2"})
                .find("data.jitter_saturation applies to the standard training transform"),
            std::string::npos);
  EXPECT_NE(with({"data.ra_magnitude=5"}).find("data.ra_magnitude is read by data.auto_augment = \"rand_augment\""),
            std::string::npos);
  EXPECT_NE(with({"data.auto_augment=ta_wide", "data.augmix_severity=5"})
                .find("data.augmix_severity is read by data.auto_augment = \"augmix\""),
            std::string::npos);
  EXPECT_NE(with({"data.ra_magnitude=31"}).find("data.ra_magnitude"), std::string::npos);  // 31 bins: 0..30
  std::vector<std::string> fine = base;
  for (const char* k :
       {"data.auto_augment=rand_augment", "data.ra_magnitude=30", "data.ra_num_ops=3", "data.random_erase=1",
        "data.jitter_brightness=0.4", "data.jitter_contrast=0.4", "data.jitter_saturation=0.4", "data.jitter_hue=0.5"})
    fine.push_back(k);
  EXPECT_NO_THROW(parse_config("", "f.toml", fine));
}

// Every key marked of_training_transform, set to a value other than its default: refused with data.dataset = "mnist"
// and with data.augment = "none", each error naming the key; accepted on an image folder's standard transform.
TEST(AutoAugmentConfig, EveryTrainingTransformKeyIsRefusedOutsideTheStandardTransform) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  std::vector<std::string> overrides;
  const DataConfig defaults;
  DataConfig::keys(defaults, [&](const auto& field, const Key& k) {
    if (!k.training_transform) return;
    using T = std::decay_t<decltype(field)>;
    std::string value;
    if constexpr (std::is_enum_v<T>) {
      for (const std::string& name : choice_names<T>())
        if (name != choice_name(field)) value = name;
    } else if constexpr (std::is_arithmetic_v<T>) {
      const double other = static_cast<double>(field) == k.max ? k.min : k.max;
      value = std::is_integral_v<T> ? std::to_string(static_cast<int64_t>(other)) : config_keys::format_number(other);
    } else {
      ADD_FAILURE() << k.name << ": a training-transform key of a kind this test cannot set";
    }
    overrides.push_back(std::string("data.") + k.name + "=" + value);
  });
  ASSERT_GE(overrides.size(), 9u);  // the policy and its three keys, random erasing, ColorJitter's four
  auto error = [](const std::vector<std::string>& keys) { return error_of([&] { parse_config("", "f.toml", keys); }); };
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    SCOPED_TRACE(o);
    EXPECT_NE(error({o}).find(key + " applies to the training transform of"), std::string::npos);
    EXPECT_NE(
        error({"data.dataset=image_folder", "data.dir=" + dir / "f", "model.name=resnet18", "data.augment=none", o})
            .find(key + " applies to the standard training transform"),
        std::string::npos);
    if (key == "data.auto_augment" || key == "data.random_erase" || key.rfind("data.jitter_", 0) == 0) {
      EXPECT_NO_THROW(
          parse_config("", "f.toml", {"data.dataset=image_folder", "data.dir=" + dir / "f", "model.name=resnet18", o}));
    }
  }
}

}  // namespace
}  // namespace ddp::test
