// data.decode = "gpu" on the loader's side, on the CPU: the rows left for the device are the JPEGs nvJPEG takes, each
// with the crop and flip the CPU path draws for it; the device's transform of a whole decode (apply_device_transform)
// gives the CPU path's pixels within 1; every other row, its label, the errors and data.on_bad_sample's replacements
// are the CPU path's; tar shards of the folder leave the same rows as its files; and without a GPU the run stops
// with one error line.
#include "data/gpu_decode.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/support/on_device.h"
#include "tests/support/test_image_folder.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

namespace ddp::test {
namespace {

// The batches of `split` in the order of `indices` (uint8, not normalised), rows left for the device or not.
std::vector<Batch> device_rows_batches(const Split& split, bool device_decode, const std::vector<int64_t>& indices) {
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  o.seed = 11;
  o.epoch = 2;
  o.normalize = false;
  o.device_decode = device_decode;
  BatchLoader loader(split, indices, o);
  std::vector<Batch> out;
  while (auto b = loader.next()) {
    b->images = b->images.clone();  // the loader reuses its buffers
    b->labels = b->labels.clone();
    out.push_back(*b);
  }
  return out;
}

// The device's transform of a row's file decoded whole (here by libjpeg), rounded: what the GPU computes, but for the
// decoder.
torch::Tensor device_rows_on_cpu(const EncodedSample& e) {
  const DecodedImage d = read_image(e.path, {});
  EXPECT_EQ(d.height, e.height) << e.path;
  EXPECT_EQ(d.width, e.width) << e.path;
  const torch::Tensor image =
      torch::from_blob(const_cast<uint8_t*>(d.rgb.data()), {d.height, d.width, 3}, torch::kUInt8).permute({2, 0, 1});
  return apply_device_transform(image, e.transform).round().to(torch::kUInt8);
}

TEST(DeviceRows, JpegRowsAreLeftForTheDeviceWithTheCpuPathsTransform) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const Config cfg = mixed_image_folder_config(dir / "f");
  const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
  for (const bool train : {true, false}) {
    const Split& split = train ? ds.train : ds.test;
    const std::vector<std::string> paths = list_image_folder(dir / (train ? "f/train" : "f/val")).paths;
    ASSERT_EQ(split.size(), 8);
    const std::vector<int64_t> indices = {5, 0, 3, 7, 1, 6, 2, 4, 3, 0};
    const std::vector<Batch> cpu = device_rows_batches(split, false, indices);
    const std::vector<Batch> dev = device_rows_batches(split, true, indices);
    ASSERT_EQ(cpu.size(), dev.size());
    int on_device = 0, on_cpu = 0, worst = 0;
    for (size_t b = 0; b < cpu.size(); ++b) {
      EXPECT_FALSE(cpu[b].device_rows);
      EXPECT_TRUE(torch::equal(cpu[b].labels, dev[b].labels)) << "batch " << b;
      for (int64_t r = 0; r < cpu[b].size(); ++r) {
        const std::string& path = paths[static_cast<size_t>(indices[b * 3 + static_cast<size_t>(r)])];
        // A batch without rows for the device carries none (null device_rows).
        const std::shared_ptr<const EncodedSample> e =
            dev[b].device_rows ? dev[b].device_rows->rows[static_cast<size_t>(r)] : nullptr;
        SCOPED_TRACE(path);
        ASSERT_EQ(e != nullptr, decoded_on_device(path));
        if (!e) {
          EXPECT_TRUE(torch::equal(cpu[b].images[r], dev[b].images[r]));
          ++on_cpu;
          continue;
        }
        ++on_device;
        EXPECT_EQ(e->path, path);
        EXPECT_EQ(e->transform.train, train);
        EXPECT_EQ(e->transform.size, 16);
        EXPECT_EQ(e->transform.resize, 18);
        const torch::Tensor got = device_rows_on_cpu(*e);
        const int diff = (got.to(torch::kInt) - cpu[b].images[r].to(torch::kInt)).abs().max().item<int>();
        EXPECT_LE(diff, 1) << "the float32 resize against the CPU path's uint8 one";
        worst = std::max(worst, diff);
        // A row nvJPEG refuses is read on the CPU from (index, seed): exactly the CPU path's row.
        EXPECT_TRUE(torch::equal(split.source->read(e->index, e->seed).image, cpu[b].images[r]));
      }
    }
    EXPECT_EQ(on_device + on_cpu, static_cast<int>(indices.size()));
    EXPECT_GT(on_device, 0);
    EXPECT_GT(on_cpu, 0);
    std::cout << "[ figures ] " << (train ? "training" : "evaluation") << ": " << on_device << " rows for the device, "
              << on_cpu << " decoded on the loader threads; max |device transform - CPU path| " << worst << "\n";
  }
}

// The same folder packed into tar shards (ddptrain --make-shards): each sample leaves the device the same JPEG bytes
// with the same transform and header, or is decoded on the CPU into the same pixels, as the folder's file.
TEST(DeviceRows, ShardsOfAFolderLeaveTheDeviceTheFoldersRows) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  write_file(dir / "convert.toml",
             "[model]\nname = \"resnet18\"\n[data]\ndataset = \"image_folder\"\nimage_size = 16\ndir = \"" + dir / "f" +
                 "\"\n");
  const CommandResult made = run_command(ddptrain_path() + " " + dir / "convert.toml" + " --make-shards " + dir / "s" +
                                         " --shard-size 0.002 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string train = made_shard_pattern(made.output, "train"), val = made_shard_pattern(made.output, "val");
  ASSERT_FALSE(train.empty() || val.empty()) << made.output;
  const Config folder_cfg = mixed_image_folder_config(dir / "f");
  const Config shard_cfg = mixed_image_folder_config(
      dir / "f",
      {"data.dataset=webdataset", "data.train_shards=" + train, "data.val_shards=" + val, "model.num_classes=2"});
  const Dataset folder = load_dataset(folder_cfg.data, folder_cfg.model, 0, {});
  const Dataset shards = load_dataset(shard_cfg.data, shard_cfg.model, 0, {});
  int on_device = 0;
  for (const bool training : {true, false}) {
    const Split& a = training ? shards.train : shards.test;
    const Split& b = training ? folder.train : folder.test;
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(torch::equal(a.labels, b.labels));
    for (int64_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE("sample " + std::to_string(i) + (training ? " (training)" : " (evaluation)"));
      const uint64_t seed = sample_seed(11, 2, i);
      const SampleSource::Prepared x = a.source->prepare_for_device(i, seed), y = b.source->prepare_for_device(i, seed);
      ASSERT_EQ(x.encoded != nullptr, y.encoded != nullptr);
      EXPECT_EQ(x.sample.index, y.sample.index);
      EXPECT_EQ(x.sample.erase.has_value(), y.sample.erase.has_value());
      if (!x.encoded) {
        EXPECT_TRUE(torch::equal(x.sample.image, y.sample.image));
        continue;
      }
      ++on_device;
      EXPECT_EQ(x.encoded->bytes, y.encoded->bytes);
      EXPECT_EQ(x.encoded->index, y.encoded->index);
      EXPECT_EQ(x.encoded->height, y.encoded->height);
      EXPECT_EQ(x.encoded->width, y.encoded->width);
      const DeviceTransform &s = x.encoded->transform, &t = y.encoded->transform;
      EXPECT_EQ(s.train, t.train);
      EXPECT_TRUE(s.crop == t.crop);
      EXPECT_EQ(s.flip, t.flip);
      EXPECT_EQ(s.size, t.size);
      EXPECT_EQ(s.resize, t.resize);
    }
  }
  EXPECT_GT(on_device, 0);
}

// Unreadable files: a zero-byte and a truncated JPEG go to the CPU decoder (jpeg_header), so with data.decode = "gpu"
// the loader stops on them with the CPU path's error, or replaces them as it does, with the same count.
TEST(DeviceRows, BadFilesStopOrAreReplacedAsOnTheCpuPath) {
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const std::string whole = read_file(dir / "f/train/a/0_gpu_baseline.jpg");
  write_file(dir / "f/train/a/0_gpu_baseline.jpg", whole.substr(0, whole.size() * 2 / 3));
  write_file(dir / "f/train/b/0_gpu_gray.jpg", "");
  const std::vector<int64_t> indices = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<std::string> paths = list_image_folder(dir / "f/train").paths;
  const auto truncated = std::find(paths.begin(), paths.end(), dir / "f/train/a/0_gpu_baseline.jpg") - paths.begin();
  ASSERT_LT(truncated, 8);
  const auto error = [&](bool device_decode) {
    const Config cfg = mixed_image_folder_config(dir / "f");
    const Dataset ds = load_dataset(cfg.data, cfg.model, 0, {});
    return error_of([&] { device_rows_batches(ds.train, device_decode, {truncated}); });
  };
  EXPECT_EQ(error(true), error(false));
  EXPECT_NE(error(true).find("0_gpu_baseline.jpg: truncated JPEG"), std::string::npos) << error(true);
  const Config skip = mixed_image_folder_config(dir / "f", {"data.on_bad_sample=skip"});
  const Dataset cpu_ds = load_dataset(skip.data, skip.model, 0, {});
  const Dataset dev_ds = load_dataset(skip.data, skip.model, 0, {});
  const std::vector<Batch> cpu = device_rows_batches(cpu_ds.train, false, indices);
  const std::vector<Batch> dev = device_rows_batches(dev_ds.train, true, indices);
  ASSERT_EQ(cpu.size(), dev.size());
  for (size_t b = 0; b < cpu.size(); ++b) EXPECT_TRUE(torch::equal(cpu[b].labels, dev[b].labels)) << b;
  EXPECT_EQ(cpu_ds.train.source->bad_samples(), 2);
  EXPECT_EQ(dev_ds.train.source->bad_samples(), 2);
}

// data.decode = "gpu" where no GPU is visible (dist.device = "auto" trains on the CPU): one error line, exit 1, before
// a step; "auto" trains on the CPU decoder.
TEST(DeviceRows, GpuDecodeWithoutAGpuStopsTheRunSayingWhy) {
  if (why_no_gpu().empty()) GTEST_SKIP() << "a GPU is visible: dist.device = \"auto\" trains on it";
  TempDir dir;
  write_mixed_image_folder(dir / "f");
  const std::string cfg = write_mnist_job(dir, dir / "f",
                                          {"model.name=resnet18", "data.image_size=16", "data.batch_size=4",
                                           "training.epochs=1", "job.out_dir=" + dir / "out", "metrics.progress=off"}) +
                          " --data.dataset=image_folder --dist.device=auto";
  const auto r = run_command(ddptrain_path() + " " + cfg + " --data.decode=gpu");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  int error_lines = 0;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) error_lines += line.find("error:") != std::string::npos;
  EXPECT_EQ(error_lines, 1) << r.output;
  EXPECT_NE(r.output.find("error: data.decode = \"gpu\" decodes JPEGs with nvJPEG on a CUDA device, and this rank "
                          "trains on cpu"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/model.pt"));
  const auto automatic = run_command(ddptrain_path() + " " + cfg + " --data.decode=auto");
  EXPECT_EQ(automatic.exit_code, 0) << automatic.output;
}

}  // namespace
}  // namespace ddp::test
