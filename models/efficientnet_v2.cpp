// EfficientNetV2-S as torchvision/models/efficientnet.py defines it (names, shapes, init, stochastic depth): one row.
#include "config/config.h"
#include "models/classifier.h"
#include "models/model_kind.h"
#include "models/stochastic_depth.h"
#include "models/torchvision_blocks.h"

#include <torch/nn.h>

#include <cmath>

namespace ddp {
namespace {

namespace nn = torch::nn;

// torchvision's MBConvConfig / FusedMBConvConfig (width and depth multipliers 1.0).
struct EfficientNetStage {
  bool fused;
  int64_t expand_ratio, kernel, stride, input_channels, out_channels, num_layers;
};

// _efficientnet_conf("efficientnet_v2_s").
const EfficientNetStage kV2S[] = {{true, 1, 3, 1, 24, 24, 2},    {true, 4, 3, 2, 24, 48, 4},
                                  {true, 4, 3, 2, 48, 64, 4},    {false, 4, 3, 2, 64, 128, 6},
                                  {false, 6, 3, 1, 128, 160, 9}, {false, 6, 3, 2, 160, 256, 15}};
constexpr int64_t kEfficientNetLastChannel = 1280;

// torchvision's MBConv (fused = false: [expand 1x1] depthwise kxk, SqueezeExcitation(SiLU, Sigmoid), project 1x1) and
// FusedMBConv (fused = true: expand kxk, project 1x1; or one kxk where the ratio is 1), under "block"; where the
// shape is kept, the block's output goes through stochastic_depth(p, "row") before the input is added.
class MBConv : public FeatureBlock {
 public:
  MBConv(const BlockContext& ctx, const EfficientNetStage& c, double stochastic_depth_prob)
      : use_res_connect_(c.stride == 1 && c.input_channels == c.out_channels), p_(stochastic_depth_prob) {
    const int64_t expanded = make_divisible(static_cast<double>(c.input_channels * c.expand_ratio), 8);
    const Activation silu = Activation::SiLU;
    auto block = std::make_shared<BlockSequence>();
    if (c.fused && expanded != c.input_channels) {
      block->add(std::make_shared<ConvNormActivation>(ctx, c.input_channels, expanded, c.kernel, c.stride, 1, silu));
      block->add(std::make_shared<ConvNormActivation>(ctx, expanded, c.out_channels, 1, 1, 1, Activation::None));
    } else if (c.fused) {
      block->add(
          std::make_shared<ConvNormActivation>(ctx, c.input_channels, c.out_channels, c.kernel, c.stride, 1, silu));
    } else {
      if (expanded != c.input_channels)
        block->add(std::make_shared<ConvNormActivation>(ctx, c.input_channels, expanded, 1, 1, 1, silu));
      block->add(std::make_shared<ConvNormActivation>(ctx, expanded, expanded, c.kernel, c.stride, expanded, silu));
      block->add(std::make_shared<SqueezeExcitation>(ctx, expanded, std::max<int64_t>(1, c.input_channels / 4), silu,
                                                     Activation::Sigmoid));
      block->add(std::make_shared<ConvNormActivation>(ctx, expanded, c.out_channels, 1, 1, 1, Activation::None));
    }
    block_ = register_module("block", block);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    torch::Tensor y = block_->forward(x);
    if (!use_res_connect_) return y;
    return stochastic_depth(y, p_, StochasticDepthMode::Row, is_training()) + x;
  }

 private:
  bool use_res_connect_;
  double p_;
  std::shared_ptr<BlockSequence> block_;
};

class EfficientNetV2 : public FeaturesThenClassifier {
 public:
  // torchvision's efficientnet_v2_s: norm_layer = partial(nn.BatchNorm2d, eps=1e-03), momentum 0.1.
  explicit EfficientNetV2(const ModelConfig& cfg) : FeaturesThenClassifier(cfg, /*bn_eps=*/1e-3, /*bn_momentum=*/0.1) {
    auto features = std::make_shared<BlockSequence>();
    features->add(std::make_shared<ConvNormActivation>(ctx(), cfg.in_channels, kV2S[0].input_channels, 3, 2, 1,
                                                       Activation::SiLU));
    int64_t total_blocks = 0, block_id = 0;
    for (const auto& c : kV2S) total_blocks += c.num_layers;
    for (const auto& stage_cfg : kV2S) {
      auto stage = std::make_shared<BlockSequence>();
      for (int64_t i = 0; i < stage_cfg.num_layers; ++i) {
        EfficientNetStage c = stage_cfg;
        if (i > 0) {
          c.input_channels = c.out_channels;
          c.stride = 1;
        }
        // torchvision: stochastic_depth_prob * stage_block_id / total_stage_blocks, rising block by block.
        const double p = cfg.stochastic_depth * static_cast<double>(block_id++) / static_cast<double>(total_blocks);
        stage->add(std::make_shared<MBConv>(ctx(), c, p));
      }
      features->add(stage);
    }
    const int64_t last_in = std::end(kV2S)[-1].out_channels;
    features->add(
        std::make_shared<ConvNormActivation>(ctx(), last_in, kEfficientNetLastChannel, 1, 1, 1, Activation::SiLU));
    register_parts(features, nn::Sequential(nn::Dropout(nn::DropoutOptions(cfg.dropout).inplace(true)),
                                            nn::Linear(kEfficientNetLastChannel, cfg.num_classes)));
    init_convs_and_norms(*this, /*zero_conv_bias=*/true);
    for (auto& m : modules(/*include_self=*/false))
      if (auto* fc = m->as<nn::Linear>()) {
        const double range = 1.0 / std::sqrt(static_cast<double>(fc->weight.size(0)));  // 1 / sqrt(out_features)
        nn::init::uniform_(fc->weight, -range, range);
        nn::init::zeros_(fc->bias);
      }
  }

  std::string head_name() const override { return "classifier.1"; }  // the Linear after torchvision's Dropout
};

}  // namespace

const ModelKind& efficientnet_v2_s_model() {
  static const ModelKind kind{
      torchvision_cnn_row("efficientnet_v2_s", "torchvision.models.efficientnet_v2_s", /*dropout=*/0.2,
                          /*stochastic_depth=*/0.2),
      [](const ModelConfig& cfg) { return std::make_shared<EfficientNetV2>(cfg); }};
  return kind;
}

}  // namespace ddp
