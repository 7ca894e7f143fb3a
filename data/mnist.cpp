// MNIST and Fashion-MNIST: the four IDX files (raw or .gz) read from data.dir, with count checks; their two rows.
#include "data/dataset.h"
#include "data/dataset_kind.h"
#include "data/download/download.h"
#include "data/idx.h"

#include <filesystem>
#include <stdexcept>

namespace ddp {
namespace {

namespace fs = std::filesystem;

std::string find_file(const std::string& dir, const std::string& base) {
  for (const std::string& candidate : {dir + "/" + base, dir + "/" + base + ".gz"})
    if (fs::exists(candidate)) return candidate;
  return "";
}

struct SplitFiles {
  std::string images, labels;
};

SplitFiles find_split(const std::string& dir, const std::string& prefix) {
  std::string images_base = prefix + "-images-idx3-ubyte", labels_base = prefix + "-labels-idx1-ubyte";
  SplitFiles f{find_file(dir, images_base), find_file(dir, labels_base)};
  for (const auto& [path, base] : {std::pair{f.images, images_base}, std::pair{f.labels, labels_base}})
    if (path.empty())
      throw std::runtime_error(dir + "/" + base + "[.gz]: file not found; put the MNIST-format IDX files in " +
                               "data.dir (" + dir + ")" + " or set data.download = true (mnist)");
  return f;
}

// Reads the images file and checks it against the labels; [N, 1, 28, 28].
torch::Tensor read_images(const SplitFiles& f, int64_t labels) {
  torch::Tensor images = read_idx(f.images);
  if (images.dim() != 3)
    throw std::runtime_error(f.images + ": expected 3 dimensions (N, rows, cols), found " +
                             std::to_string(images.dim()));
  if (images.size(1) != 28 || images.size(2) != 28)
    throw std::runtime_error(f.images + ": expected 28x28 images, found " + std::to_string(images.size(1)) + "x" +
                             std::to_string(images.size(2)));
  if (images.size(0) != labels)
    throw std::runtime_error(f.images + " has " + std::to_string(images.size(0)) + " images but " + f.labels + " has " +
                             std::to_string(labels) + " labels");
  return images.unsqueeze(1);
}

// Both files read and checked in full; the images are held only when keep_images (else read again at first use).
Split load_split(const std::string& dir, const std::string& prefix, bool keep_images) {
  const SplitFiles f = find_split(dir, prefix);
  torch::Tensor labels = read_idx(f.labels);
  if (labels.dim() != 1)
    throw std::runtime_error(f.labels + ": expected 1 dimension (N), found " + std::to_string(labels.dim()));
  const int64_t count = labels.size(0);
  Split split;
  split.labels = labels.to(torch::kInt64);
  split.read_images = [f, count] { return read_images(f, count); };
  split.images = split.read_images();
  if (!keep_images) split.release_images();
  return split;
}

}  // namespace

Dataset load_mnist_format(const std::string& name, const DataConfig& data, const DownloadNote& note) {
  if (data.download) download_mnist(data.dir, data.mirrors, note);
  Dataset ds;
  ds.name = name;
  // The test split first, checked and let go (evaluation reads it again), so that its images never share memory
  // with the train images.
  find_split(data.dir, "train");  // a missing train file is named first
  ds.test = load_split(data.dir, "t10k", /*keep_images=*/false);
  ds.train = load_split(data.dir, "train", /*keep_images=*/true);
  ds.channels = 1;
  ds.image_size = 28;
  ds.num_classes = 10;
  return ds;
}

namespace {
Dataset load_mnist_files(const DataConfig& data, const ModelConfig&, int64_t, const DownloadNote& note) {
  return load_mnist_format(data.dataset.name, data, note);
}
}  // namespace

// torchvision.datasets.MNIST: its files, fetched by data.download from torchvision's mirrors.
const DatasetKind& mnist_dataset() {
  static const DatasetKind kind{{"mnist",
                                 "MNIST-format IDX files",
                                 "data/mnist",
                                 {0.1307},
                                 {0.3081},
                                 /*channels=*/1,
                                 /*image_size=*/28,
                                 /*any_image_size=*/false,
                                 /*num_classes=*/10,
                                 /*download=*/true,
                                 /*class_folders=*/false},
                                load_mnist_files};
  return kind;
}

// torchvision.datasets.FashionMNIST, where Debian's dataset-fashion-mnist puts it.
const DatasetKind& fashion_mnist_dataset() {
  static const DatasetKind kind{{"fashion-mnist",
                                 "MNIST-format IDX files",
                                 "/usr/share/datasets/fashion-mnist",
                                 {0.2860},
                                 {0.3530},
                                 /*channels=*/1,
                                 /*image_size=*/28,
                                 /*any_image_size=*/false,
                                 /*num_classes=*/10,
                                 /*download=*/false,
                                 /*class_folders=*/false},
                                load_mnist_files};
  return kind;
}

}  // namespace ddp
