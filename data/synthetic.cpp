// Synthetic dataset (seed 000's RandomClsDS, made learnable): deterministic class templates plus noise.
#include "data/dataset.h"

namespace ddp {
namespace {

Split make_split(const torch::Tensor& templates, int64_t n, torch::Generator& gen) {
  int64_t classes = templates.size(0);
  torch::Tensor labels = torch::randint(classes, {n}, gen, torch::kInt64);
  torch::Tensor noise = torch::randint(-64, 65, {n, templates.size(1), templates.size(2), templates.size(3)}, gen,
                                       torch::kInt32);
  torch::Tensor images = (templates.index_select(0, labels) + noise).clamp(0, 255).to(torch::kUInt8);
  return {images, labels, nullptr};  // generated, not read: held for the whole run
}

}  // namespace

Dataset make_synthetic(const DataConfig& data, const ModelConfig& model, int64_t seed) {
  torch::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) + 0x5EED);
  int64_t c = model.in_channels, s = data.image_size;
  torch::Tensor templates = torch::randint(0, 256, {model.num_classes, c, s, s}, gen, torch::kInt32);
  Dataset ds;
  ds.name = "synthetic";
  ds.train = make_split(templates, data.synthetic_train_size, gen);
  ds.test = make_split(templates, data.synthetic_test_size, gen);
  ds.channels = c;
  ds.image_size = s;
  ds.num_classes = model.num_classes;
  return ds;
}

}  // namespace ddp
