// The model registry: every model.name's row, listed once (a model is its own file declaring NAME_model() plus its
// entry here), which config loading reads once they are handed down (train/linked_kinds.h); building one.
#include "models/model_kind.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/normalization.h>

#include <stdexcept>
#include <unordered_map>

namespace ddp {

// The models, in the order --help lists their names.
// clang-format off
#define DDP_MODELS(X) X(net) X(resnet18) X(resnet34) X(resnet50) X(resnet101) X(resnet152) \
  X(mobilenet_v3_large) X(efficientnet_v2_s) X(regnet_y_1_6gf) X(convnext_tiny) X(vit_b_16) X(torchscript) X(plugin)
// clang-format on

#define DDP_DECLARE_MODEL(name) const ModelKind& name##_model();
DDP_MODELS(DDP_DECLARE_MODEL)
#undef DDP_DECLARE_MODEL

const std::vector<const ModelKind*>& model_kinds() {
#define DDP_LIST_MODEL(name) &name##_model(),
  static const std::vector<const ModelKind*> kinds{DDP_MODELS(DDP_LIST_MODEL)};
#undef DDP_LIST_MODEL
  return kinds;
}

const ModelKind& model_kind(std::string_view name) {
  return kind_named(model_kinds(), &ModelKind::row, name, "model.name");
}

std::shared_ptr<Classifier> make_model(const ModelConfig& cfg) {
  ModelConfig resolved = cfg;
  resolve_model_defaults(resolved);
  return model_kind(cfg.name.name).make(resolved);
}

bool Classifier::is_norm_layer(const torch::nn::Module& m) const {
  namespace nn = torch::nn;
  return m.as<nn::BatchNorm1d>() || m.as<nn::BatchNorm2d>() || m.as<nn::BatchNorm3d>() || m.as<nn::InstanceNorm1d>() ||
         m.as<nn::InstanceNorm2d>() || m.as<nn::InstanceNorm3d>() || m.as<nn::LayerNorm>() || m.as<nn::GroupNorm>() ||
         m.as<nn::LocalResponseNorm>();
}

void check_logits(const torch::Tensor& logits, const torch::Tensor& images, int64_t num_classes,
                  const std::string& source) {
  const int64_t n = images.size(0);
  if (logits.dim() == 2 && logits.size(0) == n && logits.size(1) == num_classes) return;
  throw std::runtime_error(source + ": its forward returned shape " + c10::str(logits.sizes()) + " for " +
                           std::to_string(n) + " images; expected logits [" + std::to_string(n) + ", " +
                           std::to_string(num_classes) + "] (model.num_classes = " + std::to_string(num_classes) + ")");
}

void refuse_tied_parameters(const torch::nn::Module& m, const std::string& source) {
  std::unordered_map<const c10::TensorImpl*, std::string> first_name;
  for (const auto& p : m.named_parameters()) {
    const auto [at, fresh] = first_name.emplace(p.value().unsafeGetTensorImpl(), p.key());
    if (!fresh)
      throw std::runtime_error(source + ": parameters \"" + at->second + "\" and \"" + p.key() +
                               "\" are one tensor (tied weights), which ddptrain does not train: it steps, averages "
                               "and reduces each parameter name as a tensor of its own");
  }
}

int64_t count_parameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace ddp
