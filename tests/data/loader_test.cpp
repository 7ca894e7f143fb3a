// The prefetching BatchLoader, over splits read per sample (synthetic) and splits held in memory.
//
// The loader gives the same batches with any number of workers, from either kind of split, assembles them off the
// calling thread, resumes at a batch, and propagates errors.
#include "data/dataset.h"
#include "data/device_feed.h"
#include "data/loader.h"
#include "tests/support/on_device.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

namespace ddp::test {
namespace {

Dataset synthetic(int64_t seed, int64_t channels = 1) {
  DataConfig d;
  d.dataset = DatasetChoice{"synthetic"};
  d.synthetic_train_size = 300;
  d.synthetic_test_size = 50;
  ModelConfig m;
  m.in_channels = channels;
  return load_dataset(d, m, seed, [](const std::string&) {});
}

// The same samples held in memory: every image read once into a uint8 [N, C, H, W] tensor.
Split held_in_memory(const Split& per_sample) {
  std::vector<torch::Tensor> images;
  for (int64_t i = 0; i < per_sample.size(); ++i) images.push_back(per_sample.source->read(i, 0).image);
  Split split;
  split.images = torch::stack(images);
  split.labels = per_sample.labels;
  return split;
}

TEST(BatchLoader, SameBatchesWithAnyNumberOfWorkers) {
  Dataset ds = synthetic(3);
  Split in_memory = held_in_memory(ds.train);
  std::vector<int64_t> order;
  for (int64_t i = 299; i >= 0; i -= 2) order.push_back(i);
  auto collect = [&](const Split& split, int64_t workers, int64_t start) {
    LoaderOptions o;
    o.batch_size = 16;
    o.workers = workers;
    o.prefetch = 3;
    o.mean = {0.5};
    o.std = {0.25};
    BatchLoader loader(split, order, o, start);
    std::vector<Batch> out;
    while (auto b = loader.next()) out.push_back(*b);
    return out;
  };
  auto serial = collect(ds.train, 0, 0);
  ASSERT_EQ(serial.size(), 10u);  // 150 samples: 9 x 16 + 6
  EXPECT_EQ(serial.back().size(), 6);
  for (const Split* split : {&ds.train, &in_memory}) {
    for (int64_t workers : {0, 1, 3}) {
      auto got = collect(*split, workers, 0);
      ASSERT_EQ(got.size(), serial.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(torch::equal(got[i].images, serial[i].images)) << workers << " " << i;
        EXPECT_TRUE(torch::equal(got[i].labels, serial[i].labels)) << workers << " " << i;
      }
    }
    auto resumed = collect(*split, 2, 7);
    ASSERT_EQ(resumed.size(), 3u);
    EXPECT_TRUE(torch::equal(resumed[0].labels, serial[7].labels));
    EXPECT_TRUE(torch::equal(resumed[0].images, serial[7].images));
  }
  // Normalisation: (x / 255 - mean) / std of the selected rows.
  torch::Tensor expect = (in_memory.images.index_select(0, torch::tensor({299, 297}, torch::kInt64))
                              .to(torch::kFloat32)
                              .div(255)
                              .sub(0.5)
                              .div(0.25));
  EXPECT_TRUE(torch::equal(serial[0].images.slice(0, 0, 2), expect));
  EXPECT_TRUE(
      torch::equal(serial[0].labels.slice(0, 0, 2), ds.train.labels.index_select(0, torch::tensor({299, 297}))));
}

TEST(BatchLoader, PrefetchesAheadOnAWorkerThread) {
  Dataset ds = synthetic(4);
  std::vector<int64_t> order(256);
  for (int64_t i = 0; i < 256; ++i) order[i] = i;
  LoaderOptions o;
  o.batch_size = 32;
  o.workers = 1;
  o.prefetch = 4;
  BatchLoader loader(ds.train, order, o);
  // Without consuming anything, the worker assembles exactly `prefetch` batches ahead, then waits.
  for (int i = 0; i < 200 && loader.prefetched() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(loader.prefetched(), 4);
  ASSERT_TRUE(loader.next().has_value());
  for (int i = 0; i < 200 && loader.prefetched() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(loader.prefetched(), 4);  // refilled after one was taken
}

TEST(BatchLoader, WorkerErrorsReachTheConsumer) {
  Dataset ds = synthetic(5);
  Split in_memory = held_in_memory(ds.train);
  for (const Split* split : {&ds.train, &in_memory}) {
    LoaderOptions o;
    o.batch_size = 8;
    o.workers = 2;
    BatchLoader loader(*split, {0, 1, 2, 100000}, o);  // an out-of-range index
    EXPECT_THROW(
        {
          while (loader.next()) {
          }
        },
        std::exception);
  }
}

// On CPU the device feed hands the loader's batches over unchanged, in order, and ends with it.
TEST(DeviceFeed, CpuFeedIsTheLoadersBatchesInOrder) {
  Dataset ds = synthetic(7);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < 90; ++i) order.push_back((i * 37) % 300);
  LoaderOptions o;
  o.batch_size = 16;
  o.workers = 2;
  BatchLoader plain(ds.train, order, o), fed(ds.train, order, o);
  auto feed = make_device_feed(fed, torch::kCPU);
  int64_t n = 0;
  while (auto expected = plain.next()) {
    auto got = feed->next();
    ASSERT_TRUE(got.has_value()) << "feed ended early at batch " << n;
    EXPECT_TRUE(got->images.device().is_cpu());
    EXPECT_TRUE(torch::equal(got->images, expected->images)) << n;
    EXPECT_TRUE(torch::equal(got->labels, expected->labels)) << n;
    ++n;
  }
  EXPECT_EQ(n, 6);
  EXPECT_FALSE(feed->next().has_value());
}

// Batches of 16 with per-channel mean and std (3-channel splits).
LoaderOptions rgb_options() {
  LoaderOptions o;
  o.batch_size = 16;
  o.mean = {0.4, 0.5, 0.6};
  o.std = {0.2, 0.25, 0.3};
  return o;
}

// normalize = false: the loader hands over the uint8 rows; normalize_images then gives the loader's own normalised
// batch, in whichever layout is asked for (the values equal, the strides channels_last).
TEST(BatchLoader, Uint8BatchesNormaliseLikeTheLoaderInAnyLayout) {
  Dataset ds = synthetic(5, 3);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < 40; ++i) order.push_back((i * 11) % 300);
  const LoaderOptions o = rgb_options();
  LoaderOptions raw = o;
  raw.normalize = false;
  BatchLoader normalised(ds.train, order, o), uint8(ds.train, order, raw);
  int64_t n = 0;
  while (auto expected = normalised.next()) {
    auto got = uint8.next();
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(got->images.scalar_type(), torch::kUInt8);
    EXPECT_TRUE(torch::equal(got->labels, expected->labels));
    const torch::Tensor nhwc = normalize_images(got->images, o.mean, o.std, torch::MemoryFormat::ChannelsLast);
    EXPECT_TRUE(nhwc.is_contiguous(torch::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(torch::equal(nhwc, expected->images)) << n;
    EXPECT_TRUE(torch::equal(normalize_images(got->images, o.mean, o.std), expected->images)) << n;
    ++n;
  }
  EXPECT_EQ(n, 3);
}

// A model that takes channels_last gets its batches normalised straight into that layout on the host too: the same
// values, no layout copy left for the first layer.
TEST(BatchLoader, NormalisedBatchesComeInTheModelsLayout) {
  Dataset ds = synthetic(5, 3);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < 40; ++i) order.push_back((i * 7) % 300);
  const LoaderOptions o = rgb_options();
  LoaderOptions nhwc = o;
  nhwc.memory_format = torch::MemoryFormat::ChannelsLast;
  BatchLoader plain(ds.train, order, o), channels_last(ds.train, order, nhwc);
  int64_t n = 0;
  while (auto expected = plain.next()) {
    auto got = channels_last.next();
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(expected->images.is_contiguous(torch::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(got->images.is_contiguous(torch::MemoryFormat::ChannelsLast)) << n;
    EXPECT_TRUE(torch::equal(got->images, expected->images)) << n;
    ++n;
  }
  EXPECT_EQ(n, 3);
}

// On a GPU (CTest label gpu): uint8 batches copied ahead and normalised on the device equal the loader's own
// normalised batches, channels_last where asked.
TEST(CudaDeviceFeed, NormalisesUint8BatchesOnTheDevice) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  Dataset ds = synthetic(9, 3);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < 70; ++i) order.push_back((i * 13) % 300);
  const LoaderOptions o = rgb_options();
  LoaderOptions raw = o;
  raw.normalize = false;
  raw.memory_format = torch::MemoryFormat::ChannelsLast;
  raw.pin_memory = true;
  BatchLoader plain(ds.train, order, o), fed(ds.train, order, raw);
  auto feed = make_device_feed(fed, torch::Device(torch::kCUDA, 0));
  int64_t n = 0;
  while (auto expected = plain.next()) {
    auto got = feed->next();
    ASSERT_TRUE(got.has_value()) << n;
    EXPECT_TRUE(got->images.is_cuda());
    EXPECT_TRUE(got->images.is_contiguous(torch::MemoryFormat::ChannelsLast));
    // The device divides by 255 (a scalar: its kernel may multiply by the reciprocal, two roundings), subtracts the
    // mean and divides by the std; the loader's table does the same three IEEE operations on the CPU. With y = level /
    // 255
    // <= 1 and mean / std = 2 in every channel, each side is within 2u y / std + u |y - mean| / std + u |v| <= 4u (1 +
    // |v|) of (level / 255 - mean) / std (u = 2^-24): 4.8e-7 (1 + |v|) apart at most, inside allclose's 1e-6 (1 + |v|);
    // the neighbouring level is 1 / (255 std) >= 0.013 away.
    EXPECT_TRUE(torch::allclose(got->images.cpu(), expected->images, 1e-6, 1e-6)) << n;
    EXPECT_TRUE(torch::equal(got->labels.cpu(), expected->labels)) << n;
    ++n;
  }
  EXPECT_EQ(n, 5);
}

}  // namespace
}  // namespace ddp::test
