// Synthetic dataset (a random classification set, made learnable): class templates plus bounded noise, each sample
// generated from (seed, split, index) alone when a batch asks for it; its row.
#include "data/dataset.h"
#include "data/dataset_kind.h"

#include "data/sample_key.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace ddp {
namespace {

// sample_key's streams: the class templates (indexed by class), and each split's labels and noise (by sample).
constexpr int64_t kTemplateStream = -1;
struct SplitStreams {
  int64_t labels, noise;
};
constexpr SplitStreams kTrainStreams{-2, -3}, kTestStreams{-4, -5};

// Sample `index`'s class, uniform over [0, classes) (the key's top 32 bits scaled).
int64_t synthetic_label(uint64_t seed, int64_t stream, int64_t index, int64_t classes) {
  return static_cast<int64_t>(((sample_key(seed, stream, index) >> 32) * static_cast<uint64_t>(classes)) >> 32);
}

// One split: labels drawn up front (int64 [N], the split's size), images on each read as their class's template
// plus noise uniform in [-64, 63], clamped to [0, 255].
class SyntheticSamples : public SampleSource {
 public:
  SyntheticSamples(torch::Tensor templates, uint64_t seed, SplitStreams streams, int64_t size)
      : templates_(std::move(templates)), seed_(seed), streams_(streams), size_(size) {}

  Sample read(int64_t index, uint64_t /*augmentation seed: none*/) const override {
    if (index < 0 || index >= size_)
      throw std::out_of_range("synthetic sample " + std::to_string(index) + " of a split of " + std::to_string(size_));
    const int64_t label = synthetic_label(seed_, streams_.labels, index, templates_.size(0));
    torch::Tensor image = torch::empty(templates_.sizes().slice(1), torch::kUInt8);
    const int64_t n = image.numel();
    uint8_t* out = image.data_ptr<uint8_t>();
    fill_random_bytes(sample_key(seed_, streams_.noise, index), out, n);
    const uint8_t* t = templates_.data_ptr<uint8_t>() + label * n;
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<uint8_t>(std::clamp(t[j] + (out[j] & 127) - 64, 0, 255));
    return {image, index};
  }

  // Nothing is read from files, so nothing is replaced (-1 keeps the count out of the run's reports).
  int64_t bad_samples() const override { return -1; }

 private:
  torch::Tensor templates_;  // uint8 [classes, C, H, W]
  uint64_t seed_;
  SplitStreams streams_;
  int64_t size_;
};

Split make_split(const torch::Tensor& templates, uint64_t seed, SplitStreams streams, int64_t n) {
  Split split;
  split.labels = torch::empty({n}, torch::kInt64);
  int64_t* labels = split.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) labels[i] = synthetic_label(seed, streams.labels, i, templates.size(0));
  split.source = std::make_shared<SyntheticSamples>(templates, seed, streams, n);
  return split;
}

// Refuses what the dataset holds when that cannot fit in this machine's memory, naming the keys, before the
// allocator fails (or, with overcommit, the OOM killer strikes): one uint8 template per class and an int64 label
// per sample. Images are made per sample as batches are assembled, so the split sizes cost only their labels.
void synthetic_check_memory(const DataConfig& data, const ModelConfig& model) {
  const double pixels = static_cast<double>(model.in_channels) * static_cast<double>(data.image_size) *
                        static_cast<double>(data.image_size);
  const double bytes =
      pixels * static_cast<double>(model.num_classes) +
      8.0 * (static_cast<double>(data.synthetic_train_size) + static_cast<double>(data.synthetic_test_size));
  const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (physical <= 0 || bytes <= physical) return;
  char text[256];
  std::snprintf(text, sizeof text, "%.1f GiB to hold, more than this machine's %.1f GiB of memory", bytes / (1 << 30),
                physical / (1 << 30));
  throw std::runtime_error("model.num_classes = " + std::to_string(model.num_classes) + " class templates of " +
                           std::to_string(model.in_channels) + "x" + std::to_string(data.image_size) + "x" +
                           std::to_string(data.image_size) + " and the labels of data.synthetic_train_size = " +
                           std::to_string(data.synthetic_train_size) + " + data.synthetic_test_size = " +
                           std::to_string(data.synthetic_test_size) + " samples need " + text +
                           "; lower model.num_classes, data.image_size, data.synthetic_train_size or "
                           "data.synthetic_test_size");
}

}  // namespace

Dataset make_synthetic(const DataConfig& data, const ModelConfig& model, int64_t seed) {
  synthetic_check_memory(data, model);
  const auto key_seed = static_cast<uint64_t>(seed);
  const int64_t c = model.in_channels, s = data.image_size;
  torch::Tensor templates = torch::empty({model.num_classes, c, s, s}, torch::kUInt8);
  const int64_t per_class = c * s * s;
  for (int64_t k = 0; k < model.num_classes; ++k)
    fill_random_bytes(sample_key(key_seed, kTemplateStream, k), templates.data_ptr<uint8_t>() + k * per_class,
                      per_class);
  Dataset ds;
  ds.name = "synthetic";
  ds.train = make_split(templates, key_seed, kTrainStreams, data.synthetic_train_size);
  ds.test = make_split(templates, key_seed, kTestStreams, data.synthetic_test_size);
  ds.channels = c;
  ds.image_size = s;
  ds.num_classes = model.num_classes;
  return ds;
}

// No files: the images are what [data] and [model] say (model.in_channels, data.image_size, model.num_classes); mean 0
// and std 1 leave them as ToTensor scales them.
const DatasetKind& synthetic_dataset() {
  static const DatasetKind kind{{"synthetic",
                                 "class templates made in memory",
                                 /*dir=*/"",
                                 {0.0},
                                 {1.0},
                                 /*channels=*/0,
                                 /*image_size=*/0,
                                 /*any_image_size=*/true,
                                 /*num_classes=*/0,
                                 /*download=*/false,
                                 /*class_folders=*/false},
                                [](const DataConfig& data, const ModelConfig& model, int64_t seed,
                                   const DownloadNote&) { return make_synthetic(data, model, seed); }};
  return kind;
}

}  // namespace ddp
