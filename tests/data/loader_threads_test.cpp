// The loader threads: every thread reads samples at once whatever data.prefetch says, ATen's loops stay on each
// thread, buffers are reused only once let go, planned epochs follow on the same threads.
#include "data/dataset.h"
#include "data/device_feed.h"
#include "data/image_transforms.h"
#include "data/loader.h"
#include "data/loader_threads.h"
#include "tests/support/on_device.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace ddp::test {
namespace {

// A split read per sample whose reads take `delay`: sample i is a 1x2x2 image of the value i % 256. It records how
// many reads ran at once at most, the seeds it was asked for, and what at::get_num_threads() said where it ran.
class SlowSource final : public SampleSource {
 public:
  explicit SlowSource(std::chrono::milliseconds delay) : delay_(delay) {}

  Sample read(int64_t index, uint64_t seed) const override {
    const int now = ++reading_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      seeds_.insert(seed);
      aten_threads_.insert(at::get_num_threads());
    }
    std::this_thread::sleep_for(delay_);
    --reading_;
    return {torch::full({1, 2, 2}, index % 256, torch::kUInt8), index};
  }
  int64_t bad_samples() const override { return 0; }

  int most_at_once() const { return most_.load(); }
  std::set<uint64_t> seeds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seeds_;
  }
  std::set<int> aten_threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aten_threads_;
  }

 private:
  std::chrono::milliseconds delay_;
  mutable std::atomic<int> reading_{0}, most_{0};
  mutable std::mutex mu_;
  mutable std::set<uint64_t> seeds_;
  mutable std::set<int> aten_threads_;
};

Split slow_split(int64_t n, std::shared_ptr<SlowSource> source) {
  Split split;
  split.labels = torch::arange(n, torch::kInt64).remainder(10);
  split.source = std::move(source);
  return split;
}

std::vector<int64_t> iota_order(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// n - 1, ..., 0.
std::vector<int64_t> descending(int64_t n) {
  std::vector<int64_t> v = iota_order(n);
  std::reverse(v.begin(), v.end());
  return v;
}

LoaderOptions batches_of(int64_t batch_size, int64_t workers, int64_t prefetch) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.workers = workers;
  o.prefetch = prefetch;
  return o;
}

// Sample `index` as the loader hands it out with mean 0 and std 1: the value index % 256, scaled to [0, 1].
float sample_value(int64_t index) { return static_cast<float>(index % 256) / 255.0f; }

// Four threads read four samples at once, with one batch ahead as with eight, and the batches are whole and in order.
TEST(LoaderThreads, EveryThreadReadsAtOnceWhateverThePrefetch) {
  for (int64_t prefetch : {1, 2, 8}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    auto source = std::make_shared<SlowSource>(std::chrono::milliseconds(25));
    const Split split = slow_split(64, source);
    const std::vector<int64_t> order = descending(32);
    BatchLoader loader(split, order, batches_of(8, 4, prefetch));
    int64_t b = 0;
    while (auto batch = loader.next()) {
      ASSERT_EQ(batch->size(), 8);
      for (int64_t r = 0; r < 8; ++r) {
        const int64_t index = order[static_cast<size_t>(b * 8 + r)];
        EXPECT_EQ(batch->images[r].flatten()[3].item<float>(), sample_value(index)) << b << " " << r;
        EXPECT_EQ(batch->labels[r].item<int64_t>(), index % 10);
      }
      ++b;
    }
    EXPECT_EQ(b, 4);
    EXPECT_EQ(source->most_at_once(), 4);
  }
}

// ATen's loops run on the loader thread itself (at::get_num_threads() is 1 there), while the process keeps its own
// intra-op threads.
TEST(LoaderThreads, RunAtenLoopsOnTheThreadItself) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  auto source = std::make_shared<SlowSource>(std::chrono::milliseconds(0));
  const Split split = slow_split(16, source);
  BatchLoader loader(split, iota_order(16), batches_of(4, 3, 4));
  while (loader.next()) {
  }
  EXPECT_EQ(source->aten_threads(), std::set<int>{1});
  EXPECT_EQ(at::get_num_threads(), 2);
  at::set_num_threads(before);
}

// A buffer goes back into assembly only once the consumer lets its batch go: a batch held stays as it was handed
// out while later ones are assembled, and batches let go are assembled again in the same memory.
TEST(BatchLoader, ReusesBuffersOnlyOnceTheirBatchIsLetGo) {
  torch::manual_seed(3);
  Split held_split;  // images held in memory, as an IDX split's are
  held_split.images = torch::randint(0, 256, {400, 1, 28, 28}, torch::kUInt8);
  held_split.labels = torch::randint(0, 10, {400}, torch::kInt64);
  const std::vector<int64_t> order = descending(400);
  LoaderOptions o = batches_of(10, 2, 2);
  o.mean = {0.5};
  o.std = {0.25};
  BatchLoader loader(held_split, order, o);
  const Batch held = *loader.next();
  const torch::Tensor held_copy = held.images.clone();
  std::set<const void*> memory;
  int64_t n = 1;
  while (auto b = loader.next()) {
    memory.insert(b->images.data_ptr());
    EXPECT_NE(b->images.data_ptr(), held.images.data_ptr());
    const torch::Tensor rows = torch::tensor(std::vector<int64_t>(order.begin() + n * 10, order.begin() + n * 10 + 10));
    EXPECT_TRUE(torch::equal(b->images,
                             held_split.images.index_select(0, rows).to(torch::kFloat32).div(255).sub(0.5).div(0.25)))
        << n;
    ++n;
  }
  EXPECT_EQ(n, 40);
  EXPECT_TRUE(torch::equal(held.images, held_copy));
  EXPECT_LE(memory.size(), 4u);  // the batches ahead and the one in hand
}

// Planned epochs follow on the same loader: each with its own samples and augmentation seeds, the next epoch's
// first batches assembled before the epoch before has been handed out to its end.
TEST(BatchLoader, PlannedEpochsFollowWithTheirOwnSamplesAndSeeds) {
  auto source = std::make_shared<SlowSource>(std::chrono::milliseconds(0));
  const Split split = slow_split(40, source);
  const std::vector<int64_t> second = descending(20);
  LoaderOptions o = batches_of(6, 2, 2);
  o.seed = 5;
  o.epoch = 3;
  BatchLoader loader(split, iota_order(20), o, /*start_batch=*/1);
  loader.plan_epoch(second, 4);
  EXPECT_TRUE(loader.epoch_planned());
  EXPECT_EQ(loader.epoch(), 3);
  std::vector<int64_t> labels;
  for (int b = 0; b < 3; ++b) labels.push_back(loader.next()->labels[0].item<int64_t>());
  // The epoch's batches are all out: the threads go on into the next one while the consumer has not said its end.
  for (int i = 0; i < 200 && loader.prefetched() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loader.prefetched(), 2);
  EXPECT_FALSE(loader.next().has_value());  // epoch 3's end
  EXPECT_EQ(loader.epoch(), 4);
  EXPECT_EQ(loader.num_batches(), 4);
  EXPECT_EQ(loader.indices(), second);
  EXPECT_FALSE(loader.epoch_planned());
  int64_t rows = 0;
  while (auto b = loader.next()) {
    labels.push_back(b->labels[0].item<int64_t>());
    rows += b->size();
  }
  EXPECT_EQ(rows, 20);
  EXPECT_FALSE(loader.next().has_value());  // still the end, until another epoch is planned
  EXPECT_EQ(labels, (std::vector<int64_t>{6, 2, 8, 9, 3, 7, 1}));
  std::set<uint64_t> seeds;
  for (int64_t i = 6; i < 20; ++i) seeds.insert(sample_seed(5, 3, i));
  for (int64_t i = 0; i < 20; ++i) seeds.insert(sample_seed(5, 4, i));
  EXPECT_EQ(source->seeds(), seeds);
  loader.plan_epoch(iota_order(3), 5);  // planned after the end was said: it follows at once
  EXPECT_EQ(loader.epoch(), 5);
  ASSERT_TRUE(loader.next().has_value());
  EXPECT_FALSE(loader.next().has_value());
}

// A split read per sample that records, for each sample, when it was told as coming and when it was read (a
// counter both share), and how many samples had been read when each was told.
class TellingSource final : public SampleSource {
 public:
  Sample read(int64_t index, uint64_t) const override {
    std::lock_guard<std::mutex> lock(mu_);
    read_at_[index].push_back(++clock_);
    ++reads_;
    return {torch::full({1, 2, 2}, index % 256, torch::kUInt8), index};
  }
  int64_t bad_samples() const override { return 0; }
  void coming(const int64_t* indices, size_t count) const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; k < count; ++k) {
      told_at_[indices[k]].push_back(++clock_);
      reads_when_told_[indices[k]] = reads_;
    }
  }
  mutable std::map<int64_t, std::vector<int64_t>> told_at_, read_at_;
  mutable std::map<int64_t, int64_t> reads_when_told_;

 private:
  mutable std::mutex mu_;
  mutable int64_t clock_ = 0, reads_ = 0;
};

// The loader tells its source every sample it will read once, before reading it and at most `prefetch` batches
// ahead of the batch it assembles; an epoch resumed at a batch tells only the samples it reads, and each planned
// epoch tells its own.
TEST(BatchLoader, TellsTheSourceEachSampleOnceBeforeReadingItAFewBatchesAhead) {
  for (const int64_t workers : {0, 2}) {
    auto source = std::make_shared<TellingSource>();
    Split split;
    split.labels = torch::zeros({100}, torch::kInt64);
    split.source = source;
    const int64_t batch = 4, prefetch = 3;
    BatchLoader loader(split, iota_order(50), batches_of(batch, workers, prefetch), /*start_batch=*/2);
    int64_t rows = 0;
    while (auto b = loader.next()) rows += b->size();
    std::vector<int64_t> second(50);
    for (int64_t i = 0; i < 50; ++i) second[static_cast<size_t>(i)] = 99 - i;
    loader.plan_epoch(second, 1);
    while (auto b = loader.next()) rows += b->size();
    EXPECT_EQ(rows, 42 + 50);
    EXPECT_EQ(source->read_at_.size(), 92u) << workers;
    for (const auto& [index, reads] : source->read_at_) {
      ASSERT_EQ(reads.size(), 1u) << index;
      const auto told = source->told_at_.find(index);
      ASSERT_NE(told, source->told_at_.end()) << "sample " << index << " was read untold (workers " << workers << ")";
      ASSERT_EQ(told->second.size(), 1u) << index;
      EXPECT_LT(told->second[0], reads[0]) << index;
    }
    EXPECT_EQ(source->told_at_.size(), 92u);  // samples 0..7, before the resumed batch, are not told
    if (workers == 0) {                       // read on the consumer's thread: how far ahead is exact
      for (const auto& [index, reads_then] : source->reads_when_told_) {
        const int64_t position = index < 50 ? index - 8 : 99 - index, batch_of = position / batch;
        EXPECT_GE(reads_then, (index < 50 ? 0 : 42) + std::max<int64_t>(0, batch_of - prefetch) * batch)
            << "sample " << index << " told more than " << prefetch << " batches ahead";
      }
    }
  }
}

// On a GPU (CTest label gpu): the feed goes on into the epoch planned after the first, and every batch of both,
// assembled in the loader's reused pinned buffers, has the values of the loader's own normalised batches.
TEST(CudaDeviceFeed, GoesOnIntoThePlannedEpochOverReusedPinnedBuffers) {
  if (const std::string why = why_no_gpu(); !why.empty()) GTEST_SKIP() << why;
  DataConfig d;
  d.dataset = DatasetChoice{"synthetic"};
  d.synthetic_train_size = 120;
  d.synthetic_test_size = 10;
  ModelConfig m;
  m.in_channels = 3;
  const Dataset ds = load_dataset(d, m, 9, [](const std::string&) {});
  LoaderOptions o = batches_of(16, 2, 2);
  o.mean = {0.4, 0.5, 0.6};
  o.std = {0.2, 0.25, 0.3};
  LoaderOptions raw = o;
  raw.normalize = false;
  raw.pin_memory = true;
  raw.memory_format = torch::MemoryFormat::ChannelsLast;
  const std::vector<int64_t> first = iota_order(100), second = descending(90);
  BatchLoader fed(ds.train, first, raw);
  fed.plan_epoch(second, 1);
  auto feed = make_device_feed(fed, torch::Device(torch::kCUDA, 0));
  int64_t n = 0;
  for (const std::vector<int64_t>* order : {&first, &second}) {
    BatchLoader plain(ds.train, *order, o);
    while (auto expected = plain.next()) {
      auto got = feed->next();
      ASSERT_TRUE(got.has_value()) << n;
      EXPECT_TRUE(got->images.is_contiguous(torch::MemoryFormat::ChannelsLast));
      // The device divides by 255 (a scalar: its kernel may multiply by the reciprocal, two roundings), subtracts the
      // mean and divides by the std; the loader's table does the same three IEEE operations on the CPU. With y = level
      // / 255
      // <= 1 and mean / std = 2 in every channel, each side is within 2u y / std + u |y - mean| / std + u |v| <= 4u (1
      // + |v|) of (level / 255 - mean) / std (u = 2^-24): 4.8e-7 (1 + |v|) apart at most, inside allclose's 1e-6 (1 +
      // |v|); the neighbouring level is 1 / (255 std) >= 0.013 away.
      EXPECT_TRUE(torch::allclose(got->images.cpu(), expected->images, 1e-6, 1e-6)) << n;
      EXPECT_TRUE(torch::equal(got->labels.cpu(), expected->labels)) << n;
      ++n;
    }
    EXPECT_FALSE(feed->next().has_value()) << "the epoch's end";
  }
  EXPECT_EQ(n, 7 + 6);
}

}  // namespace
}  // namespace ddp::test
