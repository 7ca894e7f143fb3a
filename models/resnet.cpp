// ResNet-18/34/50/101/152 as torchvision defines them (names, shapes, init), with a configurable stem: five model rows.
#include "config/config.h"
#include "models/batch_norm.h"
#include "models/classifier.h"
#include "models/conv.h"
#include "models/model_kind.h"

#include <torch/nn.h>

#include <stdexcept>

namespace ddp {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}
nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false));
}

// Residual block; `bottleneck` selects torchvision's Bottleneck (expansion 4) over BasicBlock (expansion 1).
class Block : public nn::Module {
 public:
  Block(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride, bool downsample, ConvKernels kernels,
        std::shared_ptr<BatchNormLayers> bn_layers)
      : kernels_(kernels), bn_layers_(std::move(bn_layers)) {
    const int64_t out = planes * (bottleneck ? 4 : 1);
    // torchvision registers each conv's BatchNorm right after it (conv1, bn1, conv2, bn2[, conv3, bn3]),
    // which fixes the state_dict order.
    std::vector<nn::Conv2d> convs;
    std::vector<int64_t> widths;
    if (bottleneck) {
      convs = {conv1x1(inplanes, planes, 1), conv3x3(planes, planes, stride), conv1x1(planes, out, 1)};
      widths = {planes, planes, out};
    } else {
      convs = {conv3x3(inplanes, planes, stride), conv3x3(planes, planes, 1)};
      widths = {planes, planes};
    }
    for (size_t i = 0; i < convs.size(); ++i) {
      const std::string n = std::to_string(i + 1);
      convs_.push_back(register_module("conv" + n, convs[i]));
      bns_.push_back(register_module("bn" + n, nn::BatchNorm2d(widths[i])));
    }
    register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    if (downsample) {
      // torchvision's Sequential (names downsample.0, downsample.1), run here layer by layer.
      downsample_conv_ = conv1x1(inplanes, out, stride);
      downsample_bn_ = nn::BatchNorm2d(out);
      register_module("downsample", nn::Sequential(downsample_conv_, downsample_bn_));
    }
  }

  // In torchvision's order: the convolutions, then the downsample. Backward then reaches the downsample's
  // parameters first, as it does in PyTorch, so DDP's rebuilt buckets list the gradients in PyTorch's order (which
  // powerSGD_hook's layout of P and Q and its random draws follow).
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = x;
    for (size_t i = 0; i < convs_.size(); ++i) {
      y = bn_layers_->forward(*bns_[i], conv2d_forward(*convs_[i], y, kernels_));
      if (i + 1 < convs_.size()) y = y.relu_();
    }
    torch::Tensor identity = downsample_conv_ ? bn_layers_->forward(*downsample_bn_, downsample_conv_->forward(x)) : x;
    return y.add_(identity).relu_();  // torchvision: out += identity; relu(out)
  }

 private:
  std::vector<nn::Conv2d> convs_;
  std::vector<nn::BatchNorm2d> bns_;
  nn::Conv2d downsample_conv_{nullptr};
  nn::BatchNorm2d downsample_bn_{nullptr};
  ConvKernels kernels_;
  std::shared_ptr<BatchNormLayers> bn_layers_;
};
TORCH_MODULE_IMPL(BlockModule, Block);

class ResNet : public Classifier {
 public:
  ResNet(bool bottleneck, const std::vector<int64_t>& layers, const ModelConfig& cfg)
      : bottleneck_(bottleneck), kernels_(conv_kernels(cfg, /*channels_last_by_default=*/false)) {
    conv1_ = register_module("conv1",
                             nn::Conv2d(nn::Conv2dOptions(cfg.in_channels, 64, 7).stride(2).padding(3).bias(false)));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    maxpool_ = register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int i = 0; i < 4; ++i)
      layers_.push_back(register_module("layer" + std::to_string(i + 1), make_layer(widths[i], layers[i], i ? 2 : 1)));
    avgpool_ = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
    fc_ = register_module("fc", nn::Linear(512 * (bottleneck ? 4 : 1), cfg.num_classes));
    // torchvision: kaiming_normal_(fan_out, relu) for convs, BN weight 1 / bias 0, zero_init_residual off.
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
        nn::init::constant_(bn->weight, 1);
        nn::init::constant_(bn->bias, 0);
      }
    }
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = maxpool_->forward(bn_layers_->forward(*bn1_, conv2d_forward(*conv1_, x, kernels_)).relu_());
    for (auto& layer : layers_) x = layer->forward(x);
    x = torch::flatten(avgpool_->forward(x), 1);
    return fc_->forward(x);
  }

  std::string head_name() const override { return "fc"; }

  void synchronize_batchnorm(const c10::intrusive_ptr<BatchNormCollectives>& collectives) override {
    bn_layers_->synchronize(collectives);
  }

  // The last BatchNorm sees the input after five stride-2 stages (conv1, maxpool, layer2-4), each ceil(s / 2).
  int64_t min_training_batch(int64_t image_size) const override {
    int64_t s = image_size;
    for (int stage = 0; stage < 5; ++stage) s = (s + 1) / 2;
    return s * s > 1 ? 1 : 2;
  }

 private:
  nn::Sequential make_layer(int64_t planes, int64_t blocks, int64_t stride) {
    const int64_t expansion = bottleneck_ ? 4 : 1;
    nn::Sequential layer;
    bool downsample = stride != 1 || inplanes_ != planes * expansion;
    layer->push_back(BlockModule(bottleneck_, inplanes_, planes, stride, downsample, kernels_, bn_layers_));
    inplanes_ = planes * expansion;
    for (int64_t i = 1; i < blocks; ++i)
      layer->push_back(BlockModule(bottleneck_, inplanes_, planes, 1, false, kernels_, bn_layers_));
    return layer;
  }

  bool bottleneck_;
  ConvKernels kernels_;
  std::shared_ptr<BatchNormLayers> bn_layers_ = std::make_shared<BatchNormLayers>();
  int64_t inplanes_ = 64;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  nn::MaxPool2d maxpool_{nullptr};
  std::vector<nn::Sequential> layers_;
  nn::AdaptiveAvgPool2d avgpool_{nullptr};
  nn::Linear fc_{nullptr};
};

// One row per depth: torchvision's resnetN, whether its blocks are bottlenecks and the blocks per stage
// (torchvision/models/resnet.py: resnet18 ... resnet152).
ModelKind resnet_kind(std::string_view name, std::string_view torchvision, bool bottleneck,
                      std::vector<int64_t> blocks) {
  return {{name, torchvision, "torchvision's ResNets", /*batch_norm=*/true, /*cuda_graph=*/true, /*head_known=*/true,
           /*path=*/""},
          [bottleneck, blocks](const ModelConfig& cfg) { return std::make_shared<ResNet>(bottleneck, blocks, cfg); }};
}
}  // namespace

const ModelKind& resnet18_model() {
  static const ModelKind kind = resnet_kind("resnet18", "torchvision.models.resnet18", false, {2, 2, 2, 2});
  return kind;
}
const ModelKind& resnet34_model() {
  static const ModelKind kind = resnet_kind("resnet34", "torchvision.models.resnet34", false, {3, 4, 6, 3});
  return kind;
}
const ModelKind& resnet50_model() {
  static const ModelKind kind = resnet_kind("resnet50", "torchvision.models.resnet50", true, {3, 4, 6, 3});
  return kind;
}
const ModelKind& resnet101_model() {
  static const ModelKind kind = resnet_kind("resnet101", "torchvision.models.resnet101", true, {3, 4, 23, 3});
  return kind;
}
const ModelKind& resnet152_model() {
  static const ModelKind kind = resnet_kind("resnet152", "torchvision.models.resnet152", true, {3, 8, 36, 3});
  return kind;
}

}  // namespace ddp
