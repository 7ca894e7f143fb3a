// A plugin whose forward fails as LibTorch fails: the run's one error line names the library.
#include <ddptrain/plugin_api.h>

#include <torch/nn.h>

namespace {

struct MismatchedNet : ddptrain::PluginModel {
  explicit MismatchedNet(const ddptrain::ModelOptions& options)
      : fc(register_module("fc", torch::nn::Linear(7, options.num_classes))) {}
  // Flattened images are wider than 7 features: at::linear refuses the shapes.
  torch::Tensor forward(torch::Tensor images) override { return fc(images.flatten(1)); }
  std::string head_name() const override { return "fc"; }
  torch::nn::Linear fc;
};

std::unique_ptr<ddptrain::PluginModel> make_mismatched(const ddptrain::ModelOptions& options) {
  return std::make_unique<MismatchedNet>(options);
}

}  // namespace

DDPTRAIN_PLUGIN(make_mismatched)
