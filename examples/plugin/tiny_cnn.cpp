// TinyCnn, the example plugin: three 3x3 convolutions with BatchNorm, global average pooling and a Linear head.
//
// Each convolution is followed by BatchNorm and ReLU (torchvision's ResNet stem: conv, bn, relu); dropout before the
// head.
#include <ddptrain/plugin_api.h>

#include <torch/nn.h>

#include <memory>
#include <string>
#include <vector>

namespace {

class TinyCnn : public ddptrain::PluginModel {
 public:
  explicit TinyCnn(const ddptrain::ModelOptions& options) : dropout_(options.dropout) {
    namespace nn = torch::nn;
    int64_t in = options.in_channels;
    for (int i = 0; i < 3; ++i) {
      const int64_t out = int64_t{16} << i;  // 16, 32, 64 channels, halving the side after the first
      const std::string n = std::to_string(i + 1);
      // conv before its BatchNorm: the state dict's order (conv1.weight, bn1.weight, ..., fc.bias)
      convs_.push_back(register_module(
          "conv" + n, nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(i == 0 ? 1 : 2).padding(1).bias(false))));
      bns_.push_back(register_module("bn" + n, nn::BatchNorm2d(out)));
      in = out;
    }
    fc_ = register_module("fc", nn::Linear(in, options.num_classes));
  }

  torch::Tensor forward(torch::Tensor x) override {
    for (size_t i = 0; i < convs_.size(); ++i) x = torch::relu(batch_norm(bns_[i], convs_[i]->forward(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    x = torch::dropout(x, dropout_, is_training());
    return fc_->forward(x);
  }

  std::string head_name() const override { return "fc"; }

 private:
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::BatchNorm2d> bns_;
  torch::nn::Linear fc_{nullptr};
  double dropout_;
};

std::unique_ptr<ddptrain::PluginModel> make_tiny_cnn(const ddptrain::ModelOptions& options) {
  return std::make_unique<TinyCnn>(options);
}

}  // namespace

DDPTRAIN_PLUGIN(make_tiny_cnn)
