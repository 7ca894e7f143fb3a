// ViT-B/16 as torchvision defines it (torchvision/models/vision_transformer.py: names, shapes, init, dropout), its
// attention computed as torch.nn.MultiheadAttention computes it, through scaled_dot_product_attention.
#include "config/config.h"
#include "models/classifier.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/model_kind.h"
#include "models/trunc_normal.h"

#include <ATen/ATen.h>
#include <torch/nn.h>

#include <cmath>
#include <stdexcept>

namespace ddp {
namespace {

namespace nn = torch::nn;

constexpr int64_t kPatch = 16, kLayers = 12, kHeads = 12, kHidden = 768, kMlp = 3072;

// torch.nn.MultiheadAttention(dim, heads, batch_first=True) for self-attention without masks or weights
// (need_weights=False), in F.multi_head_attention_forward's operations: the packed in_proj on the (L, N, E)
// transpose, split into q, k, v and heads, scaled_dot_product_attention, out_proj. Its init is _reset_parameters':
// xavier_uniform_ in_proj_weight, zero in_proj_bias and out_proj.bias, out_proj.weight as Linear's own.
class SelfAttention : public nn::Module {
 public:
  SelfAttention(int64_t dim, int64_t heads, double dropout) : heads_(heads), dropout_(dropout) {
    in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({3 * dim, dim}));
    in_proj_bias_ = register_parameter("in_proj_bias", torch::zeros({3 * dim}));
    out_proj_ = register_module("out_proj", nn::Linear(dim, dim));
    nn::init::xavier_uniform_(in_proj_weight_);
    nn::init::zeros_(out_proj_->bias);
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor query = x.transpose(1, 0);  // (L, N, E)
    const int64_t length = query.size(0), batch = query.size(1), dim = query.size(2), head_dim = dim / heads_;
    // _in_projection_packed: the (3, E) split is deliberate there (chunk()'s order), then contiguous.
    const torch::Tensor proj = at::linear(query, in_proj_weight_, in_proj_bias_)
                                   .unflatten(-1, {3, dim})
                                   .unsqueeze(0)
                                   .transpose(0, -2)
                                   .squeeze(-2)
                                   .contiguous();
    auto heads = [&](const torch::Tensor& t) {
      return t.view({length, batch * heads_, head_dim}).transpose(0, 1).view({batch, heads_, length, head_dim});
    };
    torch::Tensor out = at::scaled_dot_product_attention(heads(proj[0]), heads(proj[1]), heads(proj[2]), {},
                                                         is_training() ? dropout_ : 0.0);
    out = out.permute({2, 0, 1, 3}).contiguous().view({batch * length, dim});
    return linear(*out_proj_, out).view({length, batch, dim}).transpose(1, 0);
  }

 private:
  int64_t heads_;
  double dropout_;
  torch::Tensor in_proj_weight_, in_proj_bias_;
  nn::Linear out_proj_{nullptr};
};

// torchvision's EncoderBlock: x + dropout(attention(ln_1(x))), then that plus mlp(ln_2(.)), the MLP
// (torchvision.ops.MLP as MLPBlock) Linear, GELU, Dropout, Linear, Dropout at indices 0-4, its Linears xavier_uniform_
// with normal(std 1e-6) biases.
class EncoderBlock : public nn::Module {
 public:
  EncoderBlock(double dropout, double attention_dropout) : dropout_(dropout) {
    ln_1_ = register_module("ln_1", layer_norm(kHidden));
    attention_ = register_module("self_attention", std::make_shared<SelfAttention>(kHidden, kHeads, attention_dropout));
    ln_2_ = register_module("ln_2", layer_norm(kHidden));
    auto mlp = std::make_shared<nn::Module>();
    fc1_ = mlp->register_module("0", nn::Linear(kHidden, kMlp));
    fc2_ = mlp->register_module("3", nn::Linear(kMlp, kHidden));
    register_module("mlp", mlp);
    torch::NoGradGuard no_grad;
    for (nn::Linear* fc : {&fc1_, &fc2_}) {
      nn::init::xavier_uniform_((*fc)->weight);
      (*fc)->bias.normal_(0.0, 1e-6);
    }
  }

  torch::Tensor forward(const torch::Tensor& input) {
    torch::Tensor x = drop(attention_->forward(ln_1_->forward(input))) + input;
    torch::Tensor y = drop(linear(*fc2_, drop(torch::gelu(linear(*fc1_, ln_2_->forward(x))))));
    return x + y;
  }

 private:
  torch::Tensor drop(const torch::Tensor& t) { return dropout_ > 0.0 ? torch::dropout(t, dropout_, is_training()) : t; }

  double dropout_;
  nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  std::shared_ptr<SelfAttention> attention_;
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

// torchvision's vit_b_16: 16x16 patches of cfg.image_size images (torchvision's image_size), 12 layers of 12 heads,
// hidden 768, MLP 3072; model.dropout is torchvision's dropout, attention_dropout stays torchvision's 0.
class VisionTransformer : public Classifier {
 public:
  explicit VisionTransformer(const ModelConfig& cfg)
      : image_size_(cfg.image_size),
        dropout_(cfg.dropout),
        kernels_(conv_kernels(cfg, /*channels_last_by_default=*/false)) {
    // One position per whole patch and the class token; the config refuses sizes that are not a multiple of the
    // patch (check_vit), and forward refuses images of another size.
    const int64_t seq_length = (image_size_ / kPatch) * (image_size_ / kPatch) + 1;
    class_token_ = register_parameter("class_token", torch::zeros({1, 1, kHidden}));
    conv_proj_ =
        register_module("conv_proj", nn::Conv2d(nn::Conv2dOptions(cfg.in_channels, kHidden, kPatch).stride(kPatch)));
    auto encoder = std::make_shared<nn::Module>();
    pos_embedding_ = encoder->register_parameter("pos_embedding", torch::empty({1, seq_length, kHidden}));
    auto layers = std::make_shared<nn::Module>();
    for (int64_t i = 0; i < kLayers; ++i)
      layers_.push_back(layers->register_module("encoder_layer_" + std::to_string(i),
                                                std::make_shared<EncoderBlock>(cfg.dropout, 0.0)));
    encoder->register_module("layers", layers);
    ln_ = encoder->register_module("ln", layer_norm(kHidden));
    register_module("encoder", encoder);
    auto heads = std::make_shared<nn::Module>();
    head_ = heads->register_module("head", nn::Linear(kHidden, cfg.num_classes));
    register_module("heads", heads);
    // torchvision: pos_embedding normal(std 0.02) (from BERT), conv_proj trunc_normal_(std sqrt(1 / fan_in)) with a
    // zero bias, the head zeros.
    torch::NoGradGuard no_grad;
    pos_embedding_.normal_(0.0, 0.02);
    trunc_normal_(conv_proj_->weight, 0.0, std::sqrt(1.0 / static_cast<double>(cfg.in_channels * kPatch * kPatch)));
    conv_proj_->bias.zero_();
    head_->weight.zero_();
    head_->bias.zero_();
  }

  torch::Tensor forward(torch::Tensor x) override {
    const int64_t n = x.size(0);
    if (x.size(2) != image_size_ || x.size(3) != image_size_)
      throw std::invalid_argument("vit_b_16 was built for " + std::to_string(image_size_) + "x" +
                                  std::to_string(image_size_) + " images, got " + std::to_string(x.size(2)) + "x" +
                                  std::to_string(x.size(3)));
    const int64_t patches = (image_size_ / kPatch) * (image_size_ / kPatch);
    x = conv2d_forward(*conv_proj_, x, kernels_).reshape({n, kHidden, patches}).permute({0, 2, 1});
    x = torch::cat({class_token_.expand({n, -1, -1}), x}, 1);
    x = x + pos_embedding_;
    if (dropout_ > 0.0) x = torch::dropout(x, dropout_, is_training());
    for (auto& layer : layers_) x = layer->forward(x);
    x = ln_->forward(x);
    return linear(*head_, x.select(1, 0));
  }

  std::string head_name() const override { return "heads.head"; }

 private:
  int64_t image_size_;
  double dropout_;
  ConvKernels kernels_;
  torch::Tensor class_token_, pos_embedding_;
  nn::Conv2d conv_proj_{nullptr};
  std::vector<std::shared_ptr<EncoderBlock>> layers_;
  nn::LayerNorm ln_{nullptr};
  nn::Linear head_{nullptr};
};

// Every image side a multiple of the patch, and one size for training and evaluation: the position embedding has
// one entry per patch.
std::optional<BrokenRule> check_vit(const Config& cfg) {
  const std::string name = "model.name = \"" + cfg.model.name.name + "\"", patch = std::to_string(kPatch);
  for (const ImageSide& side : image_sides(cfg)) {
    const std::string key = side.key, value = std::to_string(side.value);
    if (side.value % kPatch != 0)
      return BrokenRule{{key, "model.name"},
                        name + " splits images into " + patch + "x" + patch + " patches: " + key + " = " + value +
                            " is not a multiple of " + patch};
    if (side.value != 0 && side.value != cfg.data.image_size)
      return BrokenRule{{key, "model.name"},
                        name + " takes one image size for training and evaluation (its position embedding has one " +
                            "entry per patch): " + key + " = " + value +
                            " differs from data.image_size = " + std::to_string(cfg.data.image_size)};
  }
  return std::nullopt;
}

}  // namespace

const ModelKind& vit_b_16_model() {
  static const ModelKind kind{
      {"vit_b_16", "torchvision.models.vit_b_16", "torchvision's ViT-B/16 (images a multiple of 16)",
       /*batch_norm=*/false, /*cuda_graph=*/true, /*head_known=*/true, /*path=*/"", /*dropout=*/0.0,
       /*stochastic_depth=*/-1, /*library=*/"", check_vit},
      [](const ModelConfig& cfg) { return std::make_shared<VisionTransformer>(cfg); }};
  return kind;
}

}  // namespace ddp
