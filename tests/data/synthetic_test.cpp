// Synthetic dataset: each sample made from (seed, split, index) alone, learnable, and never materialised.
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/loader.h"
#include "tests/support/child_run.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <regex>

namespace ddp::test {
namespace {

Dataset synthetic_set(int64_t seed, int64_t train, int64_t test, int64_t channels = 1, int64_t side = 28) {
  DataConfig d;
  d.dataset = DatasetChoice{"synthetic"};
  d.synthetic_train_size = train;
  d.synthetic_test_size = test;
  d.image_size = side;
  ModelConfig m;
  m.in_channels = channels;
  return load_dataset(d, m, seed, [](const std::string&) {});
}

torch::Tensor image_of(const Split& split, int64_t index) { return split.source->read(index, 0).image; }

int64_t pixel_sum(const torch::Tensor& image) {
  int64_t sum = 0;
  const uint8_t* p = image.data_ptr<uint8_t>();
  for (int64_t i = 0; i < image.numel(); ++i) sum += p[i];
  return sum;
}

// The split's first n images, read in order.
torch::Tensor first_images(const Split& split, int64_t n) {
  std::vector<torch::Tensor> images;
  for (int64_t i = 0; i < n; ++i) images.push_back(image_of(split, i));
  return torch::stack(images);
}

TEST(Synthetic, SamplesAreMadePerSampleWithTheConfiguredShape) {
  Dataset ds = synthetic_set(1, 300, 50, 3, 32);
  EXPECT_FALSE(ds.train.images.defined());
  ASSERT_TRUE(ds.train.source && ds.test.source);
  EXPECT_EQ(ds.train.size(), 300);
  EXPECT_EQ(ds.test.size(), 50);
  const SampleSource::Sample s = ds.train.source->read(7, 0);
  EXPECT_EQ(s.index, 7);
  EXPECT_EQ(s.image.sizes(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(s.image.scalar_type(), torch::kUInt8);
  EXPECT_EQ(ds.train.labels.scalar_type(), torch::kInt64);
  // Every class of the ten drawn, none outside them.
  EXPECT_EQ(ds.train.labels.min().item<int64_t>(), 0);
  EXPECT_EQ(ds.train.labels.max().item<int64_t>(), 9);
  EXPECT_EQ(std::get<0>(torch::_unique(ds.train.labels)).numel(), 10);
  EXPECT_EQ(ds.train.source->bad_samples(), -1);
  EXPECT_THROW(ds.train.source->read(300, 0), std::out_of_range);
  EXPECT_THROW(ds.test.source->read(-1, 0), std::out_of_range);
}

TEST(Synthetic, SameSeedSameDataOtherSeedOtherData) {
  Dataset a = synthetic_set(1, 300, 50), b = synthetic_set(1, 300, 50), c = synthetic_set(2, 300, 50);
  EXPECT_TRUE(torch::equal(first_images(a.train, 300), first_images(b.train, 300)));
  EXPECT_TRUE(torch::equal(first_images(a.test, 50), first_images(b.test, 50)));
  EXPECT_TRUE(torch::equal(a.train.labels, b.train.labels));
  EXPECT_TRUE(torch::equal(a.test.labels, b.test.labels));
  EXPECT_FALSE(torch::equal(first_images(a.train, 50), first_images(c.train, 50)));
  EXPECT_FALSE(torch::equal(a.train.labels, c.train.labels));
  // The two splits are different samples of the same classes.
  EXPECT_FALSE(torch::equal(first_images(a.train, 50), first_images(a.test, 50)));
  // A sample does not depend on the split's size.
  Dataset larger = synthetic_set(1, 1000, 70);
  EXPECT_TRUE(torch::equal(first_images(larger.train, 300), first_images(a.train, 300)));
  EXPECT_TRUE(torch::equal(larger.train.labels.slice(0, 0, 300), a.train.labels));
}

// Samples read in any order, on any number of threads, as any world size's shards in batches of any size, are the
// samples read one by one in order.
TEST(Synthetic, SamplesDoNotDependOnAccessOrderWorkersBatchOrWorld) {
  Dataset ds = synthetic_set(5, 200, 10, 3);
  const torch::Tensor in_order = first_images(ds.train, 200);
  std::vector<int64_t> backwards;
  for (int64_t i = 199; i >= 0; --i) backwards.push_back(i);
  for (int64_t i : backwards) EXPECT_TRUE(torch::equal(image_of(ds.train, i), in_order[i])) << i;
  struct Reading {
    int64_t world, batch, workers;
  };
  for (const Reading r : {Reading{1, 7, 0}, Reading{3, 16, 2}, Reading{4, 5, 3}}) {
    std::map<int64_t, int64_t> seen;
    for (int64_t rank = 0; rank < r.world; ++rank) {
      DistributedSampler sampler(200, r.world, rank, /*shuffle=*/true, /*seed=*/11, /*drop_last=*/false);
      sampler.set_epoch(r.world);  // a different order than any other reading's
      LoaderOptions o;
      o.batch_size = r.batch;
      o.workers = r.workers;
      o.normalize = false;
      o.seed = 99;
      BatchLoader loader(ds.train, sampler.indices(), o);
      size_t at = 0;
      while (auto batch = loader.next()) {
        for (int64_t j = 0; j < batch->size(); ++j, ++at) {
          const int64_t index = loader.indices()[at];
          ASSERT_TRUE(torch::equal(batch->images[j], in_order[index])) << r.world << " " << rank << " " << index;
          EXPECT_EQ(batch->labels[j].item<int64_t>(), ds.train.labels[index].item<int64_t>());
          ++seen[index];
        }
      }
    }
    EXPECT_EQ(seen.size(), 200u) << "world " << r.world;
  }
}

// Learnable: two samples of one class lie closer together than samples of two classes (each is its class's template
// plus bounded noise).
TEST(Synthetic, SamplesOfAClassAreCloserThanSamplesOfTwo) {
  Dataset ds = synthetic_set(3, 400, 10);
  const torch::Tensor images = first_images(ds.train, 400).to(torch::kFloat32).flatten(1);
  const torch::Tensor distance = torch::cdist(images, images, 1) / images.size(1);  // mean |difference| per pixel
  const torch::Tensor same = ds.train.labels.unsqueeze(1).eq(ds.train.labels.unsqueeze(0));
  const torch::Tensor off_diagonal = torch::eye(400, torch::kBool).logical_not();
  const double within = distance.masked_select(same.logical_and(off_diagonal)).max().item<double>();
  const double between = distance.masked_select(same.logical_not()).min().item<double>();
  EXPECT_LT(within, between);
}

TEST(Synthetic, NetLearnsIt) {
  TempDir dir;
  write_file(dir / "cfg.toml", "[job]\nout_dir = \"" + dir / "out" + "\"\n[data]\ndataset = \"synthetic\"\n" +
                                   "synthetic_train_size = 2000\nsynthetic_test_size = 500\nbatch_size = 32\n" +
                                   "[optimizer]\nlr = 0.05\nmomentum = 0.9\n[training]\nepochs = 2\n");
  auto r = run_command(ddptrain_path() + " " + dir / "cfg.toml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::string metrics = read_file(dir / "out/metrics.jsonl");
  ASSERT_TRUE(std::regex_search(metrics, m, std::regex("\"kind\":\"eval\".*\"epoch\":2.*\"accuracy\":([0-9.]+)")));
  // Each sample is its class's template plus bounded noise, nearer every sample of its class than any of another
  // (SamplesOfAClassAreCloserThanSamplesOfTwo): a nearest-template rule classifies them all, so any run that learns
  // ends near 1 whatever its rounding; chance is 0.1.
  EXPECT_GT(std::stod(m[1]), 0.9);
  std::cout << "[ measured ] accuracy after 2 epochs " << m[1] << "\n";
  EXPECT_EQ(metrics.find("bad_samples"), std::string::npos);  // nothing read from files, nothing replaced
}

// ImageNet's shape at ten million training samples (1.5 TB of uint8 images if they were held): building the set and
// reading samples from across it grows this process by the labels (int64 each) and the templates, not the images.
TEST(Synthetic, PeakMemoryDoesNotGrowWithTheSplitSizes) {
  constexpr int64_t kTrain = 10'000'000, kTest = 1'000'000, kSide = 224;
  const ChildRun run = run_in_child(
      [] {
        at::set_num_threads(1);  // no OpenMP team in a forked child
        Dataset ds = synthetic_set(7, kTrain, kTest, 3, kSide);
        int64_t sum = 0;
        for (int64_t i = 0; i < 64; ++i)
          sum += pixel_sum(image_of(ds.train, i * (kTrain / 64))) + pixel_sum(image_of(ds.test, i * (kTest / 64)));
        return std::string(sum > 0 ? "read" : "all zero");
      },
      120);
  ASSERT_TRUE(run.exited) << "signal " << run.signal;
  ASSERT_EQ(run.result, "read");
  const double labels_mb = 8.0 * (kTrain + kTest) / (1 << 20), templates_mb = 10.0 * 3 * kSide * kSide / (1 << 20);
  std::cout << "[ measured ] 10^7 + 10^6 synthetic samples of 3x224x224: peak growth " << run.peak_growth_mb
            << " MiB (labels " << labels_mb << " MiB, templates " << templates_mb << " MiB)\n";
  EXPECT_LT(run.peak_growth_mb, labels_mb + templates_mb + 64);
}

// Generation is cheap next to a training step: a 3x224x224 sample in well under a millisecond on one thread.
TEST(Synthetic, GeneratesSamplesQuickly) {
  for (const int64_t side : {int64_t{224}, int64_t{28}}) {
    const int64_t channels = side == 224 ? 3 : 1, n = side == 224 ? 400 : 20000;
    Dataset ds = synthetic_set(9, n, 1, channels, side);
    const auto start = std::chrono::steady_clock::now();
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += image_of(ds.train, i).data_ptr<uint8_t>()[i % (side * side)];
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double per_second = static_cast<double>(n) / seconds;
    std::cout << "[ measured ] " << channels << "x" << side << "x" << side << ": " << per_second
              << " images/s generated on one thread (checksum " << sum << ")\n";
    EXPECT_GT(per_second, side == 224 ? 500 : 20000);
  }
}

}  // namespace
}  // namespace ddp::test
