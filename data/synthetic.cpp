// Synthetic dataset (a random classification set, made learnable): deterministic class templates plus noise.
#include "data/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace ddp {
namespace {

Split make_split(const torch::Tensor& templates, int64_t n, torch::Generator& gen) {
  int64_t classes = templates.size(0);
  torch::Tensor labels = torch::randint(classes, {n}, gen, torch::kInt64);
  torch::Tensor noise =
      torch::randint(-64, 65, {n, templates.size(1), templates.size(2), templates.size(3)}, gen, torch::kInt32);
  torch::Tensor images = (templates.index_select(0, labels) + noise).clamp(0, 255).to(torch::kUInt8);
  Split split;  // generated, not read: held for the whole run
  split.images = images;
  split.labels = labels;
  return split;
}

// Refuses sizes whose generation cannot fit in this machine's memory, naming the keys, before the allocator fails
// (or, with overcommit, the OOM killer strikes). Each pixel of a split passes through ~17 bytes while generated
// (int32 noise, gathered templates, their sum and its clamp, then the uint8 image).
void synthetic_check_memory(const DataConfig& data, const ModelConfig& model) {
  const double pixels = static_cast<double>(model.in_channels) * static_cast<double>(data.image_size) *
                        static_cast<double>(data.image_size);
  const double split = static_cast<double>(std::max(data.synthetic_train_size, data.synthetic_test_size));
  const double bytes = pixels * (4.0 * static_cast<double>(model.num_classes) + 17.0 * split +
                                 static_cast<double>(data.synthetic_train_size));
  const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (physical <= 0 || bytes <= physical) return;
  char text[256];
  std::snprintf(text, sizeof text, "%.1f GiB to generate, more than this machine's %.1f GiB of memory",
                bytes / (1 << 30), physical / (1 << 30));
  throw std::runtime_error("data.synthetic_train_size = " + std::to_string(data.synthetic_train_size) +
                           ", data.synthetic_test_size = " + std::to_string(data.synthetic_test_size) + " of " +
                           std::to_string(model.in_channels) + "x" + std::to_string(data.image_size) + "x" +
                           std::to_string(data.image_size) +
                           " images (model.num_classes = " + std::to_string(model.num_classes) + ") need " + text +
                           "; lower data.synthetic_train_size, data.synthetic_test_size or data.image_size");
}

}  // namespace

Dataset make_synthetic(const DataConfig& data, const ModelConfig& model, int64_t seed) {
  synthetic_check_memory(data, model);
  torch::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) + 0x5EED);
  int64_t c = model.in_channels, s = data.image_size;
  torch::Tensor templates = torch::randint(0, 256, {model.num_classes, c, s, s}, gen, torch::kInt32);
  Dataset ds;
  ds.name = choice_name(DatasetName::Synthetic);
  ds.train = make_split(templates, data.synthetic_train_size, gen);
  ds.test = make_split(templates, data.synthetic_test_size, gen);
  ds.channels = c;
  ds.image_size = s;
  ds.num_classes = model.num_classes;
  return ds;
}

}  // namespace ddp
