// Image classification datasets (train + test split, uint8 images), built by name through their rows
// (data/dataset_kind.h).
#pragma once

#include "config/config.h"
#include "data/download/download.h"
#include "data/image_transforms.h"

#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// A sample left for the training device to decode and transform (data.decode = "gpu"): its file and the transform
// drawn for it on the loader thread.
struct EncodedSample {
  std::string path;               // named by errors
  std::vector<uint8_t> bytes;     // the whole file
  int64_t index = 0;              // the sample (the one asked for, or the readable one that replaced it)
  uint64_t seed = 0;              // its augmentation's seed: a decode on the CPU instead draws the same transform
  int64_t height = 0, width = 0;  // from the header
  DeviceTransform transform;
};

// A split whose samples are read one at a time when a batch is assembled: files decoded and transformed (image
// folders), or images generated from their index (synthetic).
class SampleSource {
 public:
  struct Sample {
    torch::Tensor image;  // uint8 [C, H, W]
    int64_t index;        // the sample read: the one asked for, or the readable one that replaced it
    // v2.RandomErasing's box, drawn with the sample's augmentation: zeroed in the normalised image; none: kept whole.
    std::optional<CropBox> erase = std::nullopt;
  };
  // A sample for a device that decodes files: its pixels (image defined), or its file (encoded set).
  struct Prepared {
    Sample sample;
    std::shared_ptr<const EncodedSample> encoded;
  };
  virtual ~SampleSource() = default;
  // Sample `index`; `seed` keys its random augmentation, if it has one. Throws naming the file, unless the source
  // replaces unreadable samples (data.on_bad_sample = "skip").
  virtual Sample read(int64_t index, uint64_t seed) const = 0;
  // Unreadable samples replaced so far; -1 for a source that reads no files.
  virtual int64_t bad_samples() const = 0;
  // read() for a loader whose device decodes JPEGs: a file the device can decode is only read and its transform
  // drawn, the same draws read() makes; any other sample is read() (decoded here, with read()'s errors and
  // replacements). A source without such files: read().
  virtual Prepared prepare_for_device(int64_t index, uint64_t seed) const { return {read(index, seed), nullptr}; }
  // The samples `indices[0, count)` will be read soon, in that order (a loader says so a few batches ahead, under its
  // lock): a source whose reads wait on a server may start fetching them. Returns without waiting; a source that
  // reads at once ignores it.
  virtual void coming(const int64_t* /*indices*/, size_t /*count*/) const {}
};

struct Split {
  torch::Tensor images;  // uint8 [N, C, H, W]; undefined while not held (see read_images) or read per sample (source)
  torch::Tensor labels;  // int64 [N], always held
  // Set for splits whose images can be read again from their files (MNIST-format): the test images are held only
  // while evaluating, the train images are let go before the final evaluation. The files were read and checked
  // in full when the dataset was built.
  std::function<torch::Tensor()> read_images;
  // Set instead of images for splits read sample by sample.
  std::shared_ptr<const SampleSource> source;
  // Set for splits of tar shards: each shard's sample count, in the split's order (ShardSampler orders them).
  std::vector<int64_t> shard_sizes;
  // The per-sample transforms in order, as the banner prints them ("" for a split without them).
  std::string transforms;
  int64_t size() const { return labels.size(0); }
  // The images, read now if they are not held (undefined for a split read per sample).
  const torch::Tensor& ensure_images();
  // Lets the images go when they can be read again; a no-op otherwise.
  void release_images();
};

struct Dataset {
  std::string name;
  Split train;
  Split test;
  int64_t channels = 1;
  int64_t image_size = 28;
  int64_t num_classes = 10;
  std::vector<std::string> classes;  // class names by label, where the dataset has them (image folders)
};

// Builds data.dataset (its row's loader, data/registry.cpp); throws std::runtime_error naming the missing or bad file.
// `note`: progress lines of a data.download (the trainer's rank-0 console).
Dataset load_dataset(const DataConfig& data, const ModelConfig& model, int64_t seed, const DownloadNote& note);

// The loaders, one file each (each beside its row).
Dataset load_mnist_format(const std::string& name, const DataConfig& data, const DownloadNote& note);
Dataset load_cifar10(const DataConfig& data);
Dataset load_image_folder(const DataConfig& data);
Dataset load_webdataset(const DataConfig& data, const ModelConfig& model);
Dataset make_synthetic(const DataConfig& data, const ModelConfig& model, int64_t seed);

// torchvision's ToTensor + Normalize of uint8 batches on one device, (x / 255 - mean) / std in float32, its mean and
// std (one value for all channels or one per channel) made there once.
class Normalizer {
 public:
  Normalizer(const PerChannel& mean, const PerChannel& std, c10::Device device);
  // The normalised float batch [B, C, H, W] in memory_format (default: the input's layout) on the device.
  torch::Tensor operator()(const torch::Tensor& uint8_images,
                           std::optional<torch::MemoryFormat> memory_format = std::nullopt) const;

 private:
  torch::Tensor mean_, std_;  // float32 [1, C, 1, 1]
};

// Normalizer(mean, std, on the images' device)(uint8_images, memory_format).
torch::Tensor normalize_images(const torch::Tensor& uint8_images, const PerChannel& mean, const PerChannel& std,
                               std::optional<torch::MemoryFormat> memory_format = std::nullopt);

}  // namespace ddp
