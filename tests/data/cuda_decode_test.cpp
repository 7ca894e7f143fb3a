// data.decode = "gpu" on a GPU (CTest label gpu; each test skips, saying why, where LibTorch sees none): nvJPEG's
// batches against the CPU decoder's through the CUDA DeviceFeed, from an image folder and from WebDataset shards,
// training runs with the same batches, and hostile JPEGs ending as on the CPU path.
#include "data/device_feed.h"
#include "data/gpu_decode.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/support/on_device.h"
#include "tests/support/test_image_folder.h"
#include "tests/support/test_jpeg.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace ddp::test {
namespace {

// The mean |difference| in pixel levels (0..255) allowed between rows nvJPEG decoded and the CPU path's, over all such
// rows and in any one row. The decoders differ in their inverse DCT and chroma upsampling: torchvision's own test of
// decode_jpeg on CUDA against its CPU decoder allows a mean of 2 levels per image (test/test_image.py,
// test_decode_jpegs_cuda). Measured with libjpeg-turbo standing in for another decoder (float IDCT and replicated
// instead of interpolated chroma, against its defaults) on this folder's images, cropped and resized to 16 as here:
// a mean of 0.91 levels per crop (median), 3.45 in the worst of 800 crops; on 500x375 photo-like JPEGs resized to 224,
// 0.93 and 2.01. The float32 resize adds at most 1 level against the CPU's uint8 kernel
// (DeviceRows.JpegRowsAreLeftForTheDeviceWithTheCpuPathsTransform).
constexpr double kCudaDecodeMeanLevels = 2.0;
constexpr double kCudaDecodeRowLevels = 4.0;

// The split's batches in the order of `indices` through the CUDA DeviceFeed, normalised, copied to the host.
std::vector<Batch> cuda_decode_batches(const Split& split, bool device_decode, const std::vector<int64_t>& indices,
                                       const Config& cfg) {
  LoaderOptions o;
  o.batch_size = 3;
  o.workers = 2;
  o.seed = 11;
  o.epoch = 2;
  o.mean = cfg.data.mean;
  o.std = cfg.data.std;
  o.normalize = false;
  o.pin_memory = true;
  o.memory_format = torch::MemoryFormat::ChannelsLast;
  o.device_decode = device_decode;
  BatchLoader loader(split, indices, o);
  const std::unique_ptr<DeviceFeed> feed = make_device_feed(loader, torch::Device(torch::kCUDA, 0));
  std::vector<Batch> out;
  while (auto b = feed->next()) out.push_back({b->images.cpu(), b->labels.cpu(), nullptr});
  return out;
}

// Every row of both splits of `ds` (the mixed folder at `root`, or shards packed from it: sample i is the folder's
// file i) through the CUDA DeviceFeed with nvJPEG and without: the same classes in the same order, the rows nvJPEG
// decodes within the bounds, the others equal. `what` names the dataset in the figures.
void expect_nvjpeg_rows_within_the_bound(const Dataset& ds, const Config& cfg, const std::string& root,
                                         const std::string& what) {
  const torch::Tensor levels = torch::tensor(cfg.data.std, torch::kFloat32).view({1, 3, 1, 1}) * 255;
  for (const bool train : {true, false}) {
    const Split& split = train ? ds.train : ds.test;
    const std::vector<std::string> paths = list_image_folder(root + (train ? "/train" : "/val")).paths;
    ASSERT_EQ(static_cast<int64_t>(paths.size()), split.size());
    std::vector<int64_t> indices(static_cast<size_t>(split.size()));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>((i * 5) % indices.size());
    const std::vector<Batch> cpu = cuda_decode_batches(split, false, indices, cfg);
    const std::vector<Batch> gpu = cuda_decode_batches(split, true, indices, cfg);
    ASSERT_EQ(cpu.size(), gpu.size());
    double worst = 0, sum = 0;
    int rows = 0;
    for (size_t b = 0; b < cpu.size(); ++b) {
      ASSERT_TRUE(torch::equal(cpu[b].labels, gpu[b].labels)) << "batch " << b;  // same samples, same classes
      const torch::Tensor diff = (cpu[b].images - gpu[b].images).abs() * levels;
      for (int64_t r = 0; r < cpu[b].size(); ++r) {
        const std::string& path = paths[static_cast<size_t>(indices[b * 3 + static_cast<size_t>(r)])];
        const double mean = diff[r].mean().item<double>();
        if (!decoded_on_device(path)) {
          EXPECT_EQ(mean, 0.0) << path << ": decoded on the loader threads in both";
          continue;
        }
        EXPECT_LE(mean, kCudaDecodeRowLevels) << path;
        worst = std::max(worst, mean);
        sum += mean;
        ++rows;
      }
    }
    ASSERT_GT(rows, 0);
    EXPECT_LE(sum / rows, kCudaDecodeMeanLevels);
    const std::string split_name = train ? "training" : "evaluation";
    report_figure("nvJPEG rows vs CPU path, " + what + ", mean |diff| in levels, " + split_name, sum / rows);
    report_figure("nvJPEG rows vs CPU path, " + what + ", mean |diff| in levels, worst row, " + split_name, worst);
  }
}

TEST(CudaDecode, NvjpegRowsMatchTheCpuPathWithinTheBound) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_mixed_image_folder(dir / "f", 2);
  const Config cfg = mixed_image_folder_config(dir / "f");
  expect_nvjpeg_rows_within_the_bound(load_dataset(cfg.data, cfg.model, 0, {}), cfg, dir / "f", "image folder");
}

// The mixed folder packed into WebDataset shards by ddptrain --make-shards (in the folder's order, the image members
// keeping their formats): the data.* keys that read them, the folder's two classes.
std::vector<std::string> mixed_shard_keys(const TempDir& dir) {
  write_file(dir / "pack.toml",
             "[data]\ndataset = \"image_folder\"\ndir = \"" + dir / "f" + "\"\n[model]\nname = \"resnet18\"\n");
  const CommandResult made =
      run_command(ddptrain_path() + " " + dir / "pack.toml --make-shards " + dir / "shards --shard-size 0.004 2>&1");
  EXPECT_EQ(made.exit_code, 0) << made.output;
  const std::string train = made_shard_pattern(made.output, "train"), val = made_shard_pattern(made.output, "val");
  EXPECT_FALSE(train.empty() || val.empty()) << made.output;
  return {"data.dataset=webdataset", "data.train_shards=" + train, "data.val_shards=" + val, "model.num_classes=2"};
}

// data.decode = "gpu" over shards: the JPEG members of a shard go to nvJPEG as the folder's files do, the PNG, CMYK
// and arithmetic-coded ones to the loader threads.
TEST(CudaDecode, NvjpegRowsOfShardsMatchTheCpuPathWithinTheBound) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_mixed_image_folder(dir / "f", 2);
  const std::vector<std::string> keys = mixed_shard_keys(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const Config cfg = mixed_image_folder_config(dir / "f", keys);
  expect_nvjpeg_rows_within_the_bound(load_dataset(cfg.data, cfg.model, 0, {}), cfg, dir / "f", "shards");
}

// Two runs of ddptrain on the GPU, data.decode = "cpu" and "gpu", on the dataset `keys` name: the same samples in
// every step (metrics.sample_ids), so the same class order and batch composition.
void expect_gpu_decode_to_train_on_the_cpu_paths_samples(const TempDir& dir, const std::vector<std::string>& keys) {
  std::string dataset;
  for (const std::string& key : keys) dataset += " " + shell_quote("--" + key);
  auto run = [&](const std::string& decode) {
    const std::string out = dir / ("out_" + decode);
    const std::string cfg = write_mnist_job(
        dir, dir / "f",
        {"model.name=resnet18", "data.image_size=16", "data.batch_size=6", "data.workers=2", "training.epochs=2",
         "metrics.sample_ids=true", "metrics.progress=plain", "job.out_dir=" + out});
    const auto r = run_command(ddptrain_path() + " " + cfg + dataset + " --dist.device=cuda --data.decode=" + decode);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::pair{r.output, read_file(out + "/samples/rank-0.jsonl")};
  };
  const auto [cpu_output, cpu_samples] = run("cpu");
  const auto [gpu_output, gpu_samples] = run("gpu");
  EXPECT_FALSE(cpu_samples.empty());
  EXPECT_EQ(gpu_samples, cpu_samples);
  EXPECT_NE(gpu_output.find("data.decode = \"gpu\": JPEGs decoded and transformed by nvJPEG on cuda"),
            std::string::npos)
      << gpu_output;
  EXPECT_NE(gpu_output.find("cudnn.benchmark on (auto)"), std::string::npos) << gpu_output;
}

TEST(CudaDecode, TrainingRunsTakeTheSameSamplesAsTheCpuPath) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_mixed_image_folder(dir / "f", 3);
  expect_gpu_decode_to_train_on_the_cpu_paths_samples(dir, {"data.dataset=image_folder"});
}

TEST(CudaDecode, TrainingRunsOnShardsTakeTheSameSamplesAsTheCpuPath) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_mixed_image_folder(dir / "f", 3);
  const std::vector<std::string> keys = mixed_shard_keys(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  expect_gpu_decode_to_train_on_the_cpu_paths_samples(dir, keys);
}

// A folder whose bad files are a zero-byte JPEG, a truncated one, one announcing 65000x65000 pixels and one whose scan
// data is noise after a valid header (nvJPEG may refuse it; the CPU decoder then decodes it, as the CPU path does).
// With data.decode = "gpu" a run stops with one error line naming a bad file, as with "cpu", or with
// data.on_bad_sample = "skip" replaces as many samples as the CPU path does; nothing crashes.
TEST(CudaDecode, HostileJpegsEndAsOnTheCpuPath) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  write_mixed_image_folder(dir / "f", 2);
  const std::string good = encode_test_jpeg({});
  write_file(dir / "f/train/a/z_empty.jpg", "");
  write_file(dir / "f/train/a/z_truncated.jpg", good.substr(0, good.size() / 2));
  std::string huge = good;
  const size_t sof = huge.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) huge[at] = static_cast<char>(0xFD), huge[at + 1] = static_cast<char>(0xE8);
  write_file(dir / "f/train/b/z_huge.jpg", huge);
  std::string noise = good;
  const size_t scan = noise.find("\xFF\xDA");
  ASSERT_NE(scan, std::string::npos);
  for (size_t i = scan + 14; i + 2 < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u >> 7) & 0x7F);
  write_file(dir / "f/train/b/z_noise.jpg", noise);
  auto run = [&](const std::string& flags) {
    const std::string cfg =
        write_mnist_job(dir, dir / "f",
                        {"model.name=resnet18", "data.image_size=16", "data.batch_size=4", "data.workers=2",
                         "training.epochs=1", "metrics.progress=plain", "job.out_dir=" + dir / "out"});
    return run_command(ddptrain_path() + " " + cfg + " --data.dataset=image_folder --dist.device=cuda " + flags);
  };
  for (const std::string decode : {"cpu", "gpu"}) {
    const auto r = run("--data.decode=" + decode);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    std::istringstream lines(r.output);
    std::vector<std::string> errors;
    for (std::string line; std::getline(lines, line);)
      if (line.find("error:") != std::string::npos) errors.push_back(line);
    ASSERT_EQ(errors.size(), 1u) << r.output;
    EXPECT_NE(errors[0].find(dir / "f/train/"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("z_"), std::string::npos) << errors[0];
  }
  const auto cpu = run("--data.decode=cpu --data.on_bad_sample=skip");
  const auto gpu = run("--data.decode=gpu --data.on_bad_sample=skip");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  const auto replaced = [](const std::string& output) {
    const size_t at = output.find("bad samples replaced");
    return at == std::string::npos ? std::string("<none>") : output.substr(at, output.find('\n', at) - at);
  };
  EXPECT_EQ(replaced(gpu.output), replaced(cpu.output)) << gpu.output;
  EXPECT_NE(replaced(cpu.output), "<none>") << cpu.output;
}

}  // namespace
}  // namespace ddp::test
