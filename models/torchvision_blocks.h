// The building blocks torchvision's MobileNetV3, EfficientNet and RegNet share (torchvision/ops/misc.py's
// Conv2dNormActivation and SqueezeExcitation, torchvision/models/_utils.py's _make_divisible), with their names.
#pragma once

#include "config/model_rows.h"
#include "models/batch_norm.h"
#include "models/classifier.h"
#include "models/conv.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

namespace ddp {

// The model row of a torchvision CNN built here: BatchNorm layers (model.sync_batchnorm), capturable, a known head,
// any image size; its torchvision defaults of model.dropout and model.stochastic_depth (-1: none).
ModelRow torchvision_cnn_row(std::string_view name, std::string_view torchvision, double dropout,
                             double stochastic_depth);

// torchvision/models/_utils.py's _make_divisible(v, divisor, min_value): v rounded to a multiple of divisor, at least
// min_value (divisor when 0), never more than 10% below v.
int64_t make_divisible(double v, int64_t divisor, int64_t min_value = 0);

// The activations torchvision's blocks take (torch.nn.ReLU, SiLU, Hardswish, Hardsigmoid, Sigmoid); None: no layer.
enum class Activation { None, ReLU, SiLU, Hardswish, Hardsigmoid, Sigmoid };
torch::Tensor activate(const torch::Tensor& x, Activation activation);

// What every convolution and BatchNorm of one model shares: the kernels the convolutions run, the BatchNorm layers'
// training forward (model.sync_batchnorm) and torchvision's norm_layer arguments.
struct BlockContext {
  ConvKernels kernels;
  std::shared_ptr<BatchNormLayers> bn_layers = std::make_shared<BatchNormLayers>();
  double bn_eps = 1e-5;
  double bn_momentum = 0.1;
};

// A module of the tree with a forward from feature map to feature map.
class FeatureBlock : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

// torch.nn.Sequential of FeatureBlocks, each under the name it is added with ("0", "1", ... unless given).
class BlockSequence : public FeatureBlock {
 public:
  void add(std::shared_ptr<FeatureBlock> block, std::string name = "");
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  std::vector<std::shared_ptr<FeatureBlock>> blocks_;
};

// torchvision.ops.Conv2dNormActivation with a BatchNorm2d: "0" the Conv2d (padding (kernel - 1) / 2, no bias), "1"
// its BatchNorm2d (ctx's eps and momentum), then the activation. The convolution runs through conv2d_forward with
// ctx's kernels, grouped and depthwise ones too (the taps it leaves out are spatial, the same for every group).
class ConvNormActivation : public FeatureBlock {
 public:
  ConvNormActivation(const BlockContext& ctx, int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                     Activation activation);
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
  Activation activation_;
  ConvKernels kernels_;
  std::shared_ptr<BatchNormLayers> bn_layers_;
};

// torchvision.ops.SqueezeExcitation: input * scale_activation(fc2(activation(fc1(avgpool(input))))), fc1 and fc2
// 1x1 convolutions with bias.
class SqueezeExcitation : public FeatureBlock {
 public:
  SqueezeExcitation(const BlockContext& ctx, int64_t channels, int64_t squeeze_channels, Activation activation,
                    Activation scale_activation);
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  torch::nn::Conv2d fc1_{nullptr}, fc2_{nullptr};
  Activation activation_, scale_activation_;
  ConvKernels kernels_;
};

// The init the three models' __init__ give every Conv2d and BatchNorm2d of `model`: weight ~ N(0, 2 / fan_out)
// (kaiming_normal_(mode="fan_out"), RegNet's normal_(std=sqrt(2 / fan_out)); fan_out = out_channels * kh * kw), bias
// zeroed where zero_conv_bias (MobileNetV3, EfficientNet; RegNet leaves nn.Conv2d's own), BatchNorm weight 1 and bias
// 0.
void init_convs_and_norms(torch::nn::Module& model, bool zero_conv_bias);

// A torchvision CNN built of these blocks: its convolutions and BatchNorm layers share ctx() (its BatchNorm layers
// are converted together by model.sync_batchnorm), and its last BatchNorm sees the input after five stride-2 stages
// (MobileNetV3-Large, EfficientNetV2-S and RegNetY-1.6GF alike).
class TorchvisionCnn : public Classifier {
 public:
  TorchvisionCnn(const ModelConfig& cfg, double bn_eps, double bn_momentum);
  void synchronize_batchnorm(const c10::intrusive_ptr<BatchNormCollectives>& collectives) override;
  // 2 where five ceil(s / 2) halvings leave a 1x1 map, else 1.
  int64_t min_training_batch(int64_t image_size) const override;

 protected:
  const BlockContext& ctx() const { return ctx_; }

 private:
  BlockContext ctx_;
};

// torchvision's MobileNetV3 and EfficientNet: "features", then an adaptive average pool to 1x1, flatten, and
// "classifier" (a Sequential ending in the head).
class FeaturesThenClassifier : public TorchvisionCnn {
 public:
  using TorchvisionCnn::TorchvisionCnn;
  torch::Tensor forward(torch::Tensor x) override;

 protected:
  // Registers the two parts, in torchvision's order; the constructor of the model calls it once.
  void register_parts(std::shared_ptr<BlockSequence> features, torch::nn::Sequential classifier);

 private:
  std::shared_ptr<BlockSequence> features_;
  torch::nn::Sequential classifier_{nullptr};
};

}  // namespace ddp
