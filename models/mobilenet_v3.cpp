// MobileNetV3-Large as torchvision/models/mobilenetv3.py defines it (names, shapes, init, forward): one model row.
#include "config/config.h"
#include "models/classifier.h"
#include "models/model_kind.h"
#include "models/torchvision_blocks.h"

#include <torch/nn.h>

namespace ddp {
namespace {

namespace nn = torch::nn;

// torchvision's InvertedResidualConfig at width_mult 1.0 (channels already multiples of 8).
struct InvertedResidualConfig {
  int64_t input_channels, kernel, expanded_channels, out_channels;
  bool use_se, use_hs;
  int64_t stride;
};

// _mobilenet_v3_conf("mobilenet_v3_large"): its bneck_conf rows ("HS": use_hs), dilation 1.
const InvertedResidualConfig kLarge[] = {
    {16, 3, 16, 16, false, false, 1},  {16, 3, 64, 24, false, false, 2},  {24, 3, 72, 24, false, false, 1},
    {24, 5, 72, 40, true, false, 2},   {40, 5, 120, 40, true, false, 1},  {40, 5, 120, 40, true, false, 1},
    {40, 3, 240, 80, false, true, 2},  {80, 3, 200, 80, false, true, 1},  {80, 3, 184, 80, false, true, 1},
    {80, 3, 184, 80, false, true, 1},  {80, 3, 480, 112, true, true, 1},  {112, 3, 672, 112, true, true, 1},
    {112, 5, 672, 160, true, true, 2}, {160, 5, 960, 160, true, true, 1}, {160, 5, 960, 160, true, true, 1}};
constexpr int64_t kMobileNetLastChannel = 1280;

// torchvision's InvertedResidual: "block" = [expand 1x1] depthwise kxk [SqueezeExcitation] project 1x1, plus the
// input where the shape is kept.
class InvertedResidual : public FeatureBlock {
 public:
  InvertedResidual(const BlockContext& ctx, const InvertedResidualConfig& c)
      : use_res_connect_(c.stride == 1 && c.input_channels == c.out_channels) {
    const Activation act = c.use_hs ? Activation::Hardswish : Activation::ReLU;
    auto block = std::make_shared<BlockSequence>();
    if (c.expanded_channels != c.input_channels)
      block->add(std::make_shared<ConvNormActivation>(ctx, c.input_channels, c.expanded_channels, 1, 1, 1, act));
    block->add(std::make_shared<ConvNormActivation>(ctx, c.expanded_channels, c.expanded_channels, c.kernel, c.stride,
                                                    c.expanded_channels, act));
    if (c.use_se)
      block->add(std::make_shared<SqueezeExcitation>(ctx, c.expanded_channels,
                                                     make_divisible(c.expanded_channels / 4, 8), Activation::ReLU,
                                                     Activation::Hardsigmoid));
    block->add(
        std::make_shared<ConvNormActivation>(ctx, c.expanded_channels, c.out_channels, 1, 1, 1, Activation::None));
    block_ = register_module("block", block);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    torch::Tensor y = block_->forward(x);
    return use_res_connect_ ? y + x : y;  // torchvision: result += input
  }

 private:
  bool use_res_connect_;
  std::shared_ptr<BlockSequence> block_;
};

class MobileNetV3 : public FeaturesThenClassifier {
 public:
  // torchvision: norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01).
  explicit MobileNetV3(const ModelConfig& cfg) : FeaturesThenClassifier(cfg, /*bn_eps=*/0.001, /*bn_momentum=*/0.01) {
    auto features = std::make_shared<BlockSequence>();
    features->add(std::make_shared<ConvNormActivation>(ctx(), cfg.in_channels, kLarge[0].input_channels, 3, 2, 1,
                                                       Activation::Hardswish));
    for (const auto& c : kLarge) features->add(std::make_shared<InvertedResidual>(ctx(), c));
    const int64_t last_in = std::end(kLarge)[-1].out_channels, last_out = 6 * last_in;
    features->add(std::make_shared<ConvNormActivation>(ctx(), last_in, last_out, 1, 1, 1, Activation::Hardswish));
    register_parts(features, nn::Sequential(nn::Linear(last_out, kMobileNetLastChannel),
                                            nn::Functional([](const torch::Tensor& x) { return torch::hardswish(x); }),
                                            nn::Dropout(nn::DropoutOptions(cfg.dropout).inplace(true)),
                                            nn::Linear(kMobileNetLastChannel, cfg.num_classes)));
    init_convs_and_norms(*this, /*zero_conv_bias=*/true);
    for (auto& m : modules(/*include_self=*/false))
      if (auto* fc = m->as<nn::Linear>()) {
        nn::init::normal_(fc->weight, 0, 0.01);
        nn::init::zeros_(fc->bias);
      }
  }

  std::string head_name() const override { return "classifier.3"; }  // the last Linear of torchvision's classifier
};

}  // namespace

const ModelKind& mobilenet_v3_large_model() {
  static const ModelKind kind{
      torchvision_cnn_row("mobilenet_v3_large", "torchvision.models.mobilenet_v3_large", /*dropout=*/0.2,
                          /*stochastic_depth=*/-1),
      [](const ModelConfig& cfg) { return std::make_shared<MobileNetV3>(cfg); }};
  return kind;
}

}  // namespace ddp
