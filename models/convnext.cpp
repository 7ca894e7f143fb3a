// ConvNeXt-Tiny as torchvision defines it (torchvision/models/convnext.py: names, shapes, init, stochastic depth).
#include "config/config.h"
#include "models/classifier.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/model_kind.h"
#include "models/stochastic_depth.h"
#include "models/trunc_normal.h"

#include <torch/nn.h>

namespace ddp {
namespace {

namespace nn = torch::nn;

// torchvision's LayerNorm2d: layer_norm over the channels of an NCHW tensor, through an NHWC permutation.
torch::Tensor layer_norm_2d(nn::LayerNormImpl& norm, const torch::Tensor& x) {
  return norm.forward(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
}

// torchvision's CNBlock: depthwise 7x7 conv, LayerNorm, Linear 4x, GELU, Linear, times layer_scale, stochastic depth
// ("row"), plus the input. Its Sequential `block` holds the layers with parameters at torchvision's indices (0 conv,
// 2 norm, 3 and 5 linear; 1 and 6 are Permute, 4 GELU).
class CNBlock : public nn::Module {
 public:
  CNBlock(int64_t dim, double stochastic_depth, ConvKernels kernels)
      : stochastic_depth_(stochastic_depth), kernels_(kernels) {
    // torchvision registers layer_scale after block, but a module's own parameters precede its children's in
    // state_dict either way.
    layer_scale_ = register_parameter("layer_scale", torch::full({dim, 1, 1}, 1e-6));
    auto block = std::make_shared<nn::Module>();
    dwconv_ = block->register_module("0", nn::Conv2d(nn::Conv2dOptions(dim, dim, 7).padding(3).groups(dim)));
    norm_ = block->register_module("2", layer_norm(dim));
    fc1_ = block->register_module("3", nn::Linear(dim, 4 * dim));
    fc2_ = block->register_module("5", nn::Linear(4 * dim, dim));
    register_module("block", block);
  }

  torch::Tensor forward(const torch::Tensor& input) {
    // conv2d_forward crops taps per spatial dimension, which a depthwise (grouped) kernel allows as any other.
    torch::Tensor x = conv2d_forward(*dwconv_, input, kernels_).permute({0, 2, 3, 1});
    x = linear(*fc2_, torch::gelu(linear(*fc1_, norm_->forward(x)))).permute({0, 3, 1, 2});
    torch::Tensor result =
        stochastic_depth(layer_scale_ * x, stochastic_depth_, StochasticDepthMode::Row, is_training());
    return result += input;
  }

 private:
  torch::Tensor layer_scale_;
  nn::Conv2d dwconv_{nullptr};
  nn::LayerNorm norm_{nullptr};
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
  double stochastic_depth_;
  ConvKernels kernels_;
};

// A conv and a LayerNorm2d registered under Sequential indices: the stem (features.0: conv, then norm) and each
// downsampling layer (features.2/4/6: norm, then conv).
class ConvNorm : public nn::Module {
 public:
  ConvNorm(nn::Conv2d conv, int64_t norm_dim, bool norm_first, ConvKernels kernels)
      : norm_first_(norm_first), kernels_(kernels) {
    if (norm_first) norm_ = register_module("0", layer_norm(norm_dim));
    conv_ = register_module(norm_first ? "1" : "0", conv);
    if (!norm_first) norm_ = register_module("1", layer_norm(norm_dim));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    if (norm_first_) return conv2d_forward(*conv_, layer_norm_2d(*norm_, x), kernels_);
    return layer_norm_2d(*norm_, conv2d_forward(*conv_, x, kernels_));
  }

 private:
  bool norm_first_;
  ConvKernels kernels_;
  nn::Conv2d conv_{nullptr};
  nn::LayerNorm norm_{nullptr};
};

// torchvision's convnext_tiny: stages of (channels, blocks) (96, 3), (192, 3), (384, 9), (768, 3), a 4x4 stride-4 stem,
// a 2x2 stride-2 downsampling between stages; block k of the 18 drops its branch with probability
// stochastic_depth * k / 17 (torchvision's linear schedule).
class ConvNeXt : public Classifier {
 public:
  explicit ConvNeXt(const ModelConfig& cfg) : kernels_(conv_kernels(cfg, /*channels_last_by_default=*/false)) {
    const int64_t widths[4] = {96, 192, 384, 768}, depths[4] = {3, 3, 9, 3};
    const int64_t total_blocks = 18;
    auto features = std::make_shared<nn::Module>();
    int64_t index = 0, block_id = 0;
    auto add = [&](std::shared_ptr<nn::Module> m) { features->register_module(std::to_string(index++), m); };
    stem_ = std::make_shared<ConvNorm>(nn::Conv2d(nn::Conv2dOptions(cfg.in_channels, widths[0], 4).stride(4)),
                                       widths[0], false, kernels_);
    add(stem_);
    for (int stage = 0; stage < 4; ++stage) {
      auto blocks = std::make_shared<nn::Module>();
      std::vector<std::shared_ptr<CNBlock>> stage_blocks;
      for (int64_t i = 0; i < depths[stage]; ++i, ++block_id) {
        const double p = cfg.stochastic_depth * static_cast<double>(block_id) / (total_blocks - 1.0);
        stage_blocks.push_back(
            blocks->register_module(std::to_string(i), std::make_shared<CNBlock>(widths[stage], p, kernels_)));
      }
      add(blocks);
      stages_.push_back(std::move(stage_blocks));
      if (stage < 3) {
        downsample_.push_back(
            std::make_shared<ConvNorm>(nn::Conv2d(nn::Conv2dOptions(widths[stage], widths[stage + 1], 2).stride(2)),
                                       widths[stage], true, kernels_));
        add(downsample_.back());
      }
    }
    register_module("features", features);
    register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})));
    auto classifier = std::make_shared<nn::Module>();
    norm_ = classifier->register_module("0", layer_norm(widths[3]));
    head_ = classifier->register_module("2", nn::Linear(widths[3], cfg.num_classes));
    register_module("classifier", classifier);
    // torchvision: trunc_normal_(std=0.02) for every Conv2d and Linear weight, zero biases; LayerNorm 1 / 0.
    for (auto& m : modules(/*include_self=*/false)) {
      torch::Tensor weight, bias;
      if (auto* conv = m->as<nn::Conv2d>()) {
        weight = conv->weight, bias = conv->bias;
      } else if (auto* linear = m->as<nn::Linear>()) {
        weight = linear->weight, bias = linear->bias;
      } else {
        continue;
      }
      trunc_normal_(weight, 0.0, 0.02);
      torch::NoGradGuard no_grad;
      bias.zero_();
    }
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = stem_->forward(x);
    for (size_t stage = 0; stage < stages_.size(); ++stage) {
      for (auto& block : stages_[stage]) x = block->forward(x);
      if (stage < downsample_.size()) x = downsample_[stage]->forward(x);
    }
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    return linear(*head_, torch::flatten(layer_norm_2d(*norm_, x), 1));
  }

  std::string head_name() const override { return "classifier.2"; }

 private:
  ConvKernels kernels_;
  std::shared_ptr<ConvNorm> stem_;
  std::vector<std::vector<std::shared_ptr<CNBlock>>> stages_;
  std::vector<std::shared_ptr<ConvNorm>> downsample_;
  nn::LayerNorm norm_{nullptr};
  nn::Linear head_{nullptr};
};

// The 4x4 stride-4 stem and the three 2x2 stride-2 downsampling convolutions have no padding: a side below 32 leaves
// the last of them an empty output, which PyTorch's convolution refuses at the first forward.
constexpr int64_t kSmallestSide = 32;

std::optional<BrokenRule> check_convnext(const Config& cfg) {
  // data.image_size is a side the model sees unless both crops are set (a dataset of image files resolves them).
  const bool crops = cfg.data.train_crop_size != 0 && cfg.data.val_crop_size != 0;
  for (const ImageSide& side : image_sides(cfg))
    if (side.key == std::string("data.image_size") ? !crops && side.value < kSmallestSide
                                                   : side.value != 0 && side.value < kSmallestSide)
      return BrokenRule{{side.key, "model.name"},
                        "model.name = \"" + cfg.model.name.name + "\" downsamples by 32 without padding (a 4x4 " +
                            "stride-4 stem, three 2x2 stride-2 convolutions): " + side.key + " = " +
                            std::to_string(side.value) + " is below its smallest side, " +
                            std::to_string(kSmallestSide)};
  return std::nullopt;
}

}  // namespace

const ModelKind& convnext_tiny_model() {
  static const ModelKind kind{{"convnext_tiny", "torchvision.models.convnext_tiny", "torchvision's ConvNeXt-Tiny",
                               /*batch_norm=*/false, /*cuda_graph=*/true, /*head_known=*/true, /*path=*/"",
                               /*dropout=*/-1, /*stochastic_depth=*/0.1, /*library=*/"", check_convnext},
                              [](const ModelConfig& cfg) { return std::make_shared<ConvNeXt>(cfg); }};
  return kind;
}

}  // namespace ddp
