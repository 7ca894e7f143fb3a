// Model registry: builds the architecture model.name names (the names are config/choices.h's).
#include "config/config.h"
#include "models/classifier.h"

#include <stdexcept>

namespace ddp {

std::shared_ptr<Classifier> make_model(const ModelConfig& cfg) {
  switch (cfg.name) {
    case ModelName::Net:
      return make_net(cfg);
    case ModelName::ResNet18:
    case ModelName::ResNet34:
    case ModelName::ResNet50:
    case ModelName::ResNet101:
    case ModelName::ResNet152:
      return make_resnet(cfg.name, cfg);
    case ModelName::TorchScript:
      return make_torchscript(cfg);
  }
  throw std::invalid_argument("model.name holds no known model");
}

int64_t count_parameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace ddp
