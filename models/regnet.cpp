// RegNetY-1.6GF as torchvision/models/regnet.py defines it (names, shapes, init, forward): one model row.
#include "config/config.h"
#include "models/classifier.h"
#include "models/model_kind.h"
#include "models/torchvision_blocks.h"

#include <torch/nn.h>

#include <cmath>

namespace ddp {
namespace {

namespace nn = torch::nn;

// torchvision's regnet_y_1_6gf: BlockParams.from_init_params(depth=27, w_0=48, w_a=20.71, w_m=2.65, group_width=24,
// se_ratio=0.25) gives these four stages (stride 2 each, bottleneck multiplier 1.0); the stem is 32 wide.
struct RegNetStage {
  int64_t width, depth;
};
const RegNetStage kRegNetStages[] = {{48, 2}, {120, 6}, {336, 17}, {888, 2}};
constexpr int64_t kRegNetStemWidth = 32, kRegNetGroupWidth = 24;
constexpr double kRegNetSeRatio = 0.25;

// torchvision's ResBottleneckBlock: relu(proj(x) + f(x)) (relu(x + f(x)) without "proj"), f the
// BottleneckTransform "a" 1x1, "b" grouped 3x3, "se" SqueezeExcitation(ReLU, Sigmoid), "c" 1x1.
class ResBottleneckBlock : public FeatureBlock {
 public:
  ResBottleneckBlock(const BlockContext& ctx, int64_t width_in, int64_t width_out, int64_t stride) {
    if (width_in != width_out || stride != 1)
      proj_ = register_module(
          "proj", std::make_shared<ConvNormActivation>(ctx, width_in, width_out, 1, stride, 1, Activation::None));
    const int64_t w_b = width_out, groups = w_b / kRegNetGroupWidth;  // bottleneck_multiplier 1.0
    auto f = std::make_shared<BlockSequence>();
    f->add(std::make_shared<ConvNormActivation>(ctx, width_in, w_b, 1, 1, 1, Activation::ReLU), "a");
    f->add(std::make_shared<ConvNormActivation>(ctx, w_b, w_b, 3, stride, groups, Activation::ReLU), "b");
    const auto se_width = static_cast<int64_t>(std::nearbyint(kRegNetSeRatio * static_cast<double>(width_in)));
    f->add(std::make_shared<SqueezeExcitation>(ctx, w_b, se_width, Activation::ReLU, Activation::Sigmoid), "se");
    f->add(std::make_shared<ConvNormActivation>(ctx, w_b, width_out, 1, 1, 1, Activation::None), "c");
    f_ = register_module("f", f);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    return torch::relu((proj_ ? proj_->forward(x) : x) + f_->forward(x));
  }

 private:
  std::shared_ptr<ConvNormActivation> proj_;
  std::shared_ptr<BlockSequence> f_;
};

class RegNet : public TorchvisionCnn {
 public:
  // torchvision's _regnet: norm_layer = partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1).
  explicit RegNet(const ModelConfig& cfg) : TorchvisionCnn(cfg, /*bn_eps=*/1e-5, /*bn_momentum=*/0.1) {
    stem_ = register_module("stem", std::make_shared<ConvNormActivation>(ctx(), cfg.in_channels, kRegNetStemWidth, 3, 2,
                                                                         1, Activation::ReLU));
    trunk_ = std::make_shared<BlockSequence>();
    int64_t width = kRegNetStemWidth;
    for (size_t i = 0; i < std::size(kRegNetStages); ++i) {
      const std::string stage_name = "block" + std::to_string(i + 1);
      auto stage = std::make_shared<BlockSequence>();  // torchvision's AnyStage: blocks "blockI-J"
      for (int64_t j = 0; j < kRegNetStages[i].depth; ++j)
        stage->add(std::make_shared<ResBottleneckBlock>(ctx(), j ? kRegNetStages[i].width : width,
                                                        kRegNetStages[i].width, j ? 1 : 2),
                   stage_name + "-" + std::to_string(j));
      trunk_->add(stage, stage_name);
      width = kRegNetStages[i].width;
    }
    register_module("trunk_output", trunk_);
    fc_ = register_module("fc", nn::Linear(width, cfg.num_classes));
    init_convs_and_norms(*this, /*zero_conv_bias=*/false);
    nn::init::normal_(fc_->weight, 0.0, 0.01);
    nn::init::zeros_(fc_->bias);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = trunk_->forward(stem_->forward(x));
    return fc_->forward(torch::flatten(torch::adaptive_avg_pool2d(x, {1, 1}), 1));
  }

  std::string head_name() const override { return "fc"; }

 private:
  std::shared_ptr<ConvNormActivation> stem_;
  std::shared_ptr<BlockSequence> trunk_;
  nn::Linear fc_{nullptr};
};

}  // namespace

const ModelKind& regnet_y_1_6gf_model() {
  static const ModelKind kind{torchvision_cnn_row("regnet_y_1_6gf", "torchvision.models.regnet_y_1_6gf", /*dropout=*/-1,
                                                  /*stochastic_depth=*/-1),
                              [](const ModelConfig& cfg) { return std::make_shared<RegNet>(cfg); }};
  return kind;
}

}  // namespace ddp
