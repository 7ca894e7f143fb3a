// MNIST and Fashion-MNIST: the four IDX files (raw or .gz) read from data.dir, with count checks.
#include "data/dataset.h"
#include "data/download.h"
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

Split load_split(const std::string& dir, const std::string& prefix) {
  std::string images_base = prefix + "-images-idx3-ubyte", labels_base = prefix + "-labels-idx1-ubyte";
  std::string images_path = find_file(dir, images_base), labels_path = find_file(dir, labels_base);
  for (const auto& [path, base] : {std::pair{images_path, images_base}, std::pair{labels_path, labels_base}})
    if (path.empty())
      throw std::runtime_error(dir + "/" + base + "[.gz]: file not found; put the MNIST-format IDX files in " +
                               "data.dir (" + dir + ")" + " or set data.download = true (mnist)");
  torch::Tensor images = read_idx(images_path), labels = read_idx(labels_path);
  if (images.dim() != 3)
    throw std::runtime_error(images_path + ": expected 3 dimensions (N, rows, cols), found " +
                             std::to_string(images.dim()));
  if (images.size(1) != 28 || images.size(2) != 28)
    throw std::runtime_error(images_path + ": expected 28x28 images, found " + std::to_string(images.size(1)) + "x" +
                             std::to_string(images.size(2)));
  if (labels.dim() != 1)
    throw std::runtime_error(labels_path + ": expected 1 dimension (N), found " + std::to_string(labels.dim()));
  if (images.size(0) != labels.size(0))
    throw std::runtime_error(images_path + " has " + std::to_string(images.size(0)) + " images but " + labels_path +
                             " has " + std::to_string(labels.size(0)) + " labels");
  return {images.unsqueeze(1), labels.to(torch::kInt64)};
}

}  // namespace

Dataset load_mnist_format(const std::string& name, const DataConfig& data) {
  if (data.download) download_mnist(data.dir, data.mirrors);
  Dataset ds;
  ds.name = name;
  ds.train = load_split(data.dir, "train");
  ds.test = load_split(data.dir, "t10k");
  ds.channels = 1;
  ds.image_size = 28;
  ds.num_classes = 10;
  return ds;
}

}  // namespace ddp
