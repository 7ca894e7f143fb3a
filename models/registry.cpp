// Model registry: maps model.name to its factory.
#include "config/config.h"
#include "models/classifier.h"

#include <functional>
#include <map>
#include <stdexcept>

namespace ddp {
namespace {

using Factory = std::function<std::shared_ptr<Classifier>(const ModelConfig&)>;

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> r = [] {
    std::map<std::string, Factory> m{{"net", make_net}};
    for (const char* n : {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"})
      m[n] = [n](const ModelConfig& c) { return make_resnet(n, c); };
    return m;
  }();
  return r;
}

}  // namespace

std::shared_ptr<Classifier> make_model(const ModelConfig& cfg) {
  auto it = registry().find(cfg.name);
  if (it == registry().end()) throw std::invalid_argument("unknown model \"" + cfg.name + "\"");
  return it->second(cfg);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [n, _] : registry()) names.push_back(n);
  return names;
}

int64_t count_parameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace ddp
