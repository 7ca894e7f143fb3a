// CIFAR-10, binary version: data_batch_1..5.bin and test_batch.bin from data.dir, each record a label byte and a
// 3x32x32 image (red, green, blue planes, rows in order), as https://www.cs.toronto.edu/~kriz/cifar.html gives them;
// its row.
#include "data/dataset.h"
#include "data/dataset_kind.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ddp {
namespace {

constexpr int64_t kCifarSide = 32, kCifarChannels = 3, kCifarClasses = 10;
constexpr int64_t kCifarRecord = 1 + kCifarChannels * kCifarSide * kCifarSide;  // 3073 bytes
constexpr int64_t kCifarMaxRecords = 10000;                                     // each of the published batches

// One batch file as uint8 [records, 3073], every label checked; throws naming the file.
torch::Tensor read_cifar_batch(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec)
    throw std::runtime_error(path +
                             ": file not found; put CIFAR-10's binary version (cifar-10-binary.tar.gz, "
                             "extracted) in data.dir");
  const auto size = static_cast<int64_t>(bytes);
  if (size == 0 || size % kCifarRecord != 0 || size / kCifarRecord > kCifarMaxRecords)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes is not a CIFAR-10 batch (a multiple of " +
                             std::to_string(kCifarRecord) + " bytes, at most " + std::to_string(kCifarMaxRecords) +
                             " records)");
  torch::Tensor records = torch::empty({size / kCifarRecord, kCifarRecord}, torch::kUInt8);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(records.data_ptr<uint8_t>()), size))
    throw std::runtime_error(path + ": read failed after " + std::to_string(in.gcount()) + " bytes");
  const torch::Tensor labels = records.select(1, 0);
  const int64_t max_label = labels.max().item<int64_t>();
  if (max_label >= kCifarClasses) {
    const int64_t at = labels.ge(kCifarClasses).nonzero()[0][0].item<int64_t>();
    throw std::runtime_error(path + ": record " + std::to_string(at) + " has label " + std::to_string(max_label) +
                             "; CIFAR-10's labels are 0..9");
  }
  return records;
}

Split read_cifar_split(const std::string& dir, const std::vector<std::string>& files) {
  std::vector<torch::Tensor> parts;
  for (const std::string& f : files) parts.push_back(read_cifar_batch(dir + "/" + f));
  const torch::Tensor records = torch::cat(parts);
  Split split;
  split.labels = records.select(1, 0).to(torch::kInt64);
  split.images = records.narrow(1, 1, kCifarRecord - 1).reshape({-1, kCifarChannels, kCifarSide, kCifarSide});
  return split;
}

}  // namespace

Dataset load_cifar10(const DataConfig& data) {
  Dataset ds;
  ds.name = "cifar10";
  ds.train = read_cifar_split(
      data.dir, {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"});
  ds.test = read_cifar_split(data.dir, {"test_batch.bin"});
  ds.channels = kCifarChannels;
  ds.image_size = kCifarSide;
  ds.num_classes = kCifarClasses;
  return ds;
}

// torchvision.datasets.CIFAR10's images with the usual Normalize values for them.
const DatasetKind& cifar10_dataset() {
  static const DatasetKind kind{
      {"cifar10",
       "CIFAR-10's binary batches",
       "data/cifar-10-batches-bin",
       {0.4914, 0.4822, 0.4465},
       {0.2470, 0.2435, 0.2616},
       kCifarChannels,
       kCifarSide,
       /*any_image_size=*/false,
       kCifarClasses,
       /*download=*/false,
       /*class_folders=*/false},
      [](const DataConfig& data, const ModelConfig&, int64_t, const DownloadNote&) { return load_cifar10(data); }};
  return kind;
}

}  // namespace ddp
