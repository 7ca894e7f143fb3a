// MNIST download: not implemented yet (issue 2, slice 3); fails with a clear message instead.
#include "data/download.h"

#include <filesystem>
#include <stdexcept>

namespace ddp {

void download_mnist(const std::string& dir, const std::vector<std::string>& mirrors) {
  namespace fs = std::filesystem;
  for (const char* base : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"}) {
    std::string p = dir + "/" + base;
    if (!fs::exists(p) && !fs::exists(p + ".gz"))
      throw std::runtime_error(p + ".gz: missing and data.download is not supported by this build yet; " +
                               "download the MNIST .gz files and put them in " + dir);
  }
}

}  // namespace ddp
