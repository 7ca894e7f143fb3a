// Net: the classic PyTorch MNIST CNN (conv 1->10 k5, conv 10->20 k5, dropout2d, fc 320->50, fc 50->10, log_softmax).
#include "config/config.h"
#include "models/classifier.h"
#include "models/conv.h"
#include "models/model_kind.h"

#include <torch/nn.h>

namespace ddp {
namespace {

constexpr int64_t kSide = 28;  // the images' side

class Net : public Classifier {
 public:
  explicit Net(const ModelConfig& cfg)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(cfg.in_channels, 10, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        conv2_drop(register_module("conv2_drop", torch::nn::Dropout2d(torch::nn::Dropout2dOptions(cfg.dropout)))),
        fc1(register_module("fc1", torch::nn::Linear(320, 50))),
        fc2(register_module("fc2", torch::nn::Linear(50, cfg.num_classes))),
        dropout_(cfg.dropout),
        kernels_(conv_kernels(cfg, /*channels_last_by_default=*/true)) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(torch::max_pool2d(conv2d_forward(*conv1, x, kernels_), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2d_forward(*conv2, x, kernels_)), 2));
    x = x.contiguous().view({-1, 320});  // NCHW order, whatever layout the convolutions ran in
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, dropout_, is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, 1);
  }
  bool outputs_log_probs() const override { return true; }
  std::string head_name() const override { return "fc2"; }

 private:
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
  double dropout_;
  ConvKernels kernels_;
};

// fc1 takes conv2's 20x4x4 features of 28x28 inputs: every image the model is shown is 28x28.
std::optional<BrokenRule> check_net(const Config& cfg) {
  for (const ImageSide& side : image_sides(cfg))
    if (side.value != kSide && (side.value != 0 || side.key == std::string("data.image_size")))
      return BrokenRule{{side.key, "model.name"},
                        "model net expects " + std::to_string(kSide) + "x" + std::to_string(kSide) + " images (" +
                            side.key + " = " + std::to_string(kSide) + ")"};
  return std::nullopt;
}

}  // namespace

const ModelKind& net_model() {
  static const ModelKind kind{
      {"net", /*torchvision=*/"", "the classic MNIST CNN", /*batch_norm=*/false, /*cuda_graph=*/true,
       /*head_known=*/true, /*path=*/"", /*dropout=*/0.5, /*stochastic_depth=*/-1, /*library=*/"", check_net},
      [](const ModelConfig& cfg) { return std::make_shared<Net>(cfg); }};
  return kind;
}

}  // namespace ddp
