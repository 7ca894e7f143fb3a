// Tests: conv2d_forward (channels-last, padding-only taps skipped) computes what Conv2d::forward computes.
#include "config/config.h"
#include "models/classifier.h"
#include "models/conv.h"
#include "tests/support/rounding.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

namespace ddp {
namespace {
using test::rounding_share;

struct Shape {
  int64_t size, kernel, padding, stride, dilation;
};

std::string describe(const Shape& s) {
  return "input " + std::to_string(s.size) + " kernel " + std::to_string(s.kernel) + " padding " +
         std::to_string(s.padding) + " stride " + std::to_string(s.stride) + " dilation " + std::to_string(s.dilation);
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int64_t size : {1, 2, 3, 4, 5, 7})
    for (int64_t kernel : {1, 2, 3, 5, 7})
      for (int64_t padding : {0, 1, 2, 3})
        for (int64_t stride : {1, 2, 3})
          for (int64_t dilation : {1, 2}) {
            if (size + 2 * padding < dilation * (kernel - 1) + 1) continue;  // no output at all
            out.push_back({size, kernel, padding, stride, dilation});
          }
  return out;
}

// Oracle for live_taps: a tap is live when its weight gets a non-zero gradient from an all-ones input and all-ones
// output gradient (ATen's own convolution backward, one dimension at a time through a 1xK kernel).
std::pair<int64_t, int64_t> live_taps_by_gradient(const Shape& s) {
  auto x = torch::ones({1, 1, 1, s.size});
  auto w = torch::ones({1, 1, 1, s.kernel}, torch::requires_grad());
  auto y = torch::conv2d(x, w, torch::Tensor(), torch::IntArrayRef{1, s.stride}, torch::IntArrayRef{0, s.padding},
                         torch::IntArrayRef{1, s.dilation});
  y.sum().backward();
  auto g = w.grad().view(-1);
  int64_t first = s.kernel, last = -1;
  for (int64_t k = 0; k < s.kernel; ++k)
    if (g[k].item<float>() != 0.0f) {
      first = std::min(first, k);
      last = std::max(last, k);
    }
  return {first, last};
}

TEST(ConvKernels, LiveTapsMatchWhichWeightsGetGradient) {
  int checked = 0;
  for (const Shape& s : shapes()) {
    const auto [first, last] = live_taps_by_gradient(s);
    const LiveTaps t = live_taps(s.size, s.kernel, s.padding, s.stride, s.dilation);
    EXPECT_EQ(t.first, first) << describe(s);
    EXPECT_EQ(t.last, last) << describe(s);
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

// Output and every gradient of conv2d_forward against Conv2d::forward on the same module.
void expect_same_as_module(const Shape& h, const Shape& w, bool bias, const ConvKernels& k) {
  torch::manual_seed(h.size * 131 + w.kernel * 17 + h.stride);
  auto opts = torch::nn::Conv2dOptions(3, 4, {h.kernel, w.kernel})
                  .stride({h.stride, w.stride})
                  .padding({h.padding, w.padding})
                  .dilation({h.dilation, w.dilation})
                  .bias(bias);
  torch::nn::Conv2d conv(opts);
  auto x = torch::randn({2, 3, h.size, w.size}, torch::requires_grad());
  const std::string what = "H: " + describe(h) + "; W: " + describe(w) + (k.channels_last ? " channels_last" : "") +
                           (k.skip_padding_taps ? " skip" : "");

  auto expected = conv->forward(x);
  auto grad_out = torch::randn_like(expected);
  expected.backward(grad_out);
  auto gx = x.grad().clone(), gw = conv->weight.grad().clone();
  torch::Tensor gb = bias ? conv->bias.grad().clone() : torch::Tensor();
  x.mutable_grad().reset();
  conv->zero_grad();

  auto actual = conv2d_forward(*conv, x, k);
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  actual.backward(grad_out);
  // Both sides compute the same sums of products (padding taps contribute exact zeros) in other orders and blockings:
  // each element within twice Higham's gamma_n of its sum of |terms| (support/rounding.h), which the same
  // convolution and backward run on |x|, |weight|, |bias| and |grad_out| computes. A wrong or missing tap is a term of
  // about 1/n of that sum, hundreds of times the bound.
  torch::Tensor abs_x = x.detach().abs().requires_grad_(true);
  torch::Tensor abs_w = conv->weight.detach().abs().requires_grad_(true);
  torch::Tensor abs_b = bias ? conv->bias.detach().abs().requires_grad_(true) : torch::Tensor();
  torch::conv2d(abs_x, abs_w, abs_b, {h.stride, w.stride}, {h.padding, w.padding}, {h.dilation, w.dilation})
      .backward(grad_out.abs());
  const torch::Tensor abs_out = torch::conv2d(abs_x.detach(), abs_w.detach(), bias ? abs_b.detach() : torch::Tensor(),
                                              {h.stride, w.stride}, {h.padding, w.padding}, {h.dilation, w.dilation});
  const int64_t taps = h.kernel * w.kernel, positions = expected.size(0) * expected.size(2) * expected.size(3);
  EXPECT_LE(rounding_share(actual, expected, abs_out, 3 * taps + 1), 1.0) << what << " output";
  EXPECT_LE(rounding_share(x.grad(), gx, abs_x.grad(), 4 * taps), 1.0) << what << " input gradient";
  EXPECT_LE(rounding_share(conv->weight.grad(), gw, abs_w.grad(), positions), 1.0) << what << " weight gradient";
  if (bias) {
    EXPECT_LE(rounding_share(conv->bias.grad(), gb, abs_b.grad(), positions), 1.0) << what << " bias gradient";
  }
  // Parameters keep their layout whatever the kernels do.
  EXPECT_TRUE(conv->weight.is_contiguous()) << what;
  EXPECT_TRUE(conv->weight.grad().is_contiguous()) << what;
}

TEST(ConvKernels, SkippingPaddingTapsGivesTheSameOutputAndGradients) {
  int checked = 0;
  const auto all = shapes();
  for (size_t i = 0; i < all.size(); i += 3) {
    const Shape& h = all[i];
    const Shape& w = all[(i * 7 + 5) % all.size()];
    expect_same_as_module(h, w, /*bias=*/i % 2 == 0, ConvKernels{false, true});
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(ConvKernels, ChannelsLastGivesTheSameOutputAndGradients) {
  for (const Shape& s : {Shape{28, 5, 0, 1, 1}, Shape{12, 5, 0, 1, 1}, Shape{1, 3, 1, 1, 1}, Shape{7, 3, 1, 2, 1}})
    for (bool skip : {false, true}) expect_same_as_module(s, s, /*bias=*/true, ConvKernels{true, skip});
}

// The case that motivates skipping: ResNet's 3x3 convolutions over layer4's 1x1 maps (28x28 inputs).
TEST(ConvKernels, A3x3KernelOverA1x1MapRunsAsA1x1Kernel) {
  torch::manual_seed(0);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(8, 8, 3).padding(1).bias(false));
  auto x = torch::randn({4, 8, 1, 1});
  auto centre = torch::conv2d(x, conv->weight.slice(2, 1, 2).slice(3, 1, 2));
  EXPECT_TRUE(torch::equal(conv2d_forward(*conv, x, ConvKernels{false, true}), centre));
  // ATen's 3x3 convolution sums the same 8 products plus 64 exact zeros from the padding, in its own order.
  const torch::Tensor abs_centre = torch::conv2d(x.abs(), conv->weight.slice(2, 1, 2).slice(3, 1, 2).abs());
  EXPECT_LE(rounding_share(conv->forward(x), centre, abs_centre, 8 * 9), 1.0);
  auto live = live_taps(1, 3, 1, 1, 1);
  EXPECT_EQ(live.first, 1);
  EXPECT_EQ(live.last, 1);
}

// A map too small for the kernel (a 2x2 stride-2 convolution over a 1x1 map, ConvNeXt's last downsampling of a 28x28
// image) has no output in PyTorch: with padding taps skipped it is refused as ATen refuses it, not run on a kernel
// cropped to the map.
TEST(ConvKernels, AMapSmallerThanTheKernelIsRefusedAsPyTorchRefusesIt) {
  torch::manual_seed(0);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(4, 4, 2).stride(2));
  const auto x = torch::randn({2, 4, 1, 1});
  EXPECT_THROW(conv->forward(x), c10::Error);
  for (const bool channels_last : {false, true})
    EXPECT_THROW(conv2d_forward(*conv, x, ConvKernels{channels_last, true}), c10::Error) << channels_last;
  EXPECT_EQ(conv2d_forward(*conv, torch::randn({2, 4, 2, 2}), ConvKernels{false, true}).sizes(),
            (std::vector<int64_t>{2, 4, 1, 1}));
}

// The cropped kernel's gradient goes straight into the weight's existing gradient (DDP's bucket view), added to what
// is there: the padding taps keep their value, the live taps get the sum, and the gradient stays the same memory.
TEST(ConvKernels, CroppedKernelGradientIsAddedIntoTheExistingGradientInPlace) {
  torch::manual_seed(0);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(8, 8, 3).padding(1).bias(false));
  auto x = torch::randn({4, 8, 1, 1});
  auto grad_out = torch::randn({4, 8, 1, 1});
  conv->forward(x).backward(grad_out);
  const torch::Tensor full = conv->weight.grad().clone();  // ATen's own, over all taps

  conv->weight.mutable_grad() = torch::full_like(conv->weight, 0.5);
  void* const memory = conv->weight.grad().data_ptr();
  conv2d_forward(*conv, x, ConvKernels{false, true}).backward(grad_out);
  const torch::Tensor g = conv->weight.grad();
  EXPECT_EQ(g.data_ptr(), memory);
  auto centre = [](const torch::Tensor& t) { return t.slice(2, 1, 2).slice(3, 1, 2); };
  // Each live tap: 0.5 plus the sum of the 4 samples' products on one side, that sum plus 0.5 on the other: the same
  // 5 terms in two orders.
  const torch::Tensor abs_terms = (grad_out.abs().view({4, 8}).t().mm(x.abs().view({4, 8})) + 0.5).view({8, 8, 1, 1});
  EXPECT_LE(rounding_share(centre(g), centre(full) + 0.5, abs_terms, 5), 1.0);
  auto padding_taps = torch::ones_like(g, torch::kBool);
  centre(padding_taps).fill_(false);
  EXPECT_TRUE(torch::equal(g.masked_select(padding_taps), torch::full({8 * 8 * 8}, 0.5)));
  EXPECT_TRUE(torch::equal(full.masked_select(padding_taps), torch::zeros({8 * 8 * 8})));
}

TEST(ConvKernels, ModelMemoryFormatResolvesPerModel) {
  ModelConfig cfg;
  EXPECT_TRUE(conv_kernels(cfg, true).channels_last);
  EXPECT_FALSE(conv_kernels(cfg, false).channels_last);
  cfg.memory_format = MemoryFormat::Contiguous;
  EXPECT_FALSE(conv_kernels(cfg, true).channels_last);
  cfg.memory_format = MemoryFormat::ChannelsLast;
  EXPECT_TRUE(conv_kernels(cfg, false).channels_last);
  cfg.skip_padding_taps = false;
  EXPECT_FALSE(conv_kernels(cfg, false).skip_padding_taps);
}

// Whole models: the kernel choices change speed, not what is learned. Gradients of one batch agree for every model; Net
// also after five SGD steps. (ResNet-18 trained on noise with batch 8 amplifies last-bit differences: PyTorch's own
// resnet18, channels_last against contiguous, differs by 0.7 after five such steps.)
// The variants compute the same sums in other orders and blockings, and ResNet-18's BatchNorm backward subtracts
// nearly equal means 20 times, so how far float32 lands from the exact result depends on the model, not on a fixed
// figure: the same run in float64 (contiguous, ATen's own kernels) measures it. Each variant must lie as close to
// float64 as ATen's contiguous float32 run does, within a factor 4 for how rounding spreads over other orders (as
// measured, the variants' errors are 0.8 to 1.5 times the base's on AVX2 and on the plain path); a wrong tap or
// layout is a difference of the gradient's own size.
TEST(ConvKernels, ModelsTrainTheSameWithEveryKernelChoice) {
  struct Variant {
    const char* format;
    bool skip;
    torch::ScalarType dtype;
  };
  const std::vector<Variant> variants = {{"contiguous", false, torch::kFloat},
                                         {"channels_last", false, torch::kFloat},
                                         {"contiguous", true, torch::kFloat},
                                         {"channels_last", true, torch::kFloat},
                                         {"contiguous", false, torch::kDouble}};
  for (const std::string name : {"net", "resnet18"}) {
    std::vector<std::vector<torch::Tensor>> grads, finals;
    for (const Variant& variant : variants) {
      ModelConfig cfg;
      cfg.name = ModelChoice{name};
      cfg.dropout = 0;
      cfg.memory_format = *parse_choice<MemoryFormat>(variant.format);
      cfg.skip_padding_taps = variant.skip;
      torch::manual_seed(3);
      auto model = make_model(cfg);
      model->to(variant.dtype);
      torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
      torch::manual_seed(4);
      const int steps = name == "net" ? 5 : 1;
      for (int step = 0; step < steps; ++step) {
        auto x = torch::randn({8, 1, 28, 28}).to(variant.dtype);
        auto y = torch::randint(0, 10, {8});
        sgd.zero_grad();
        auto out = model->forward(x);
        (model->outputs_log_probs() ? torch::nll_loss(out, y) : torch::cross_entropy_loss(out, y)).backward();
        if (step == 0) {
          grads.emplace_back();
          for (const auto& p : model->parameters()) grads.back().push_back(p.grad().to(torch::kDouble));
        }
        sgd.step();
      }
      finals.emplace_back();
      for (const auto& p : model->parameters()) finals.back().push_back(p.detach().to(torch::kDouble));
    }
    // Largest distance from the float64 run, each gradient against its own scale, parameters absolute.
    const size_t exact = variants.size() - 1;
    auto gradient_error = [&](size_t v) {
      double worst = 0;
      for (size_t i = 0; i < grads[exact].size(); ++i)
        worst = std::max(worst, (grads[v][i] - grads[exact][i]).abs().max().item<double>() /
                                    std::max(grads[exact][i].abs().max().item<double>(), 1e-30));
      return worst;
    };
    auto parameter_error = [&](size_t v) {
      double worst = 0;
      for (size_t i = 0; i < finals[exact].size(); ++i)
        worst = std::max(worst, (finals[v][i] - finals[exact][i]).abs().max().item<double>());
      return worst;
    };
    const double base_gradient = gradient_error(0), base_parameter = parameter_error(0);
    EXPECT_LT(base_gradient, 1e-3) << name;  // float32 against float64: rounding, nothing else
    for (size_t v = 1; v < exact; ++v) {
      const std::string what = name + " " + variants[v].format + (variants[v].skip ? " skip" : "");
      EXPECT_LE(gradient_error(v), 4 * base_gradient) << what;
      EXPECT_LE(parameter_error(v), 4 * base_parameter) << what;
      std::cout << "[ measured ] " << what << ": gradient error " << gradient_error(v) << " (contiguous "
                << base_gradient << "), parameter error " << parameter_error(v) << " (contiguous " << base_parameter
                << ")\n";
    }
  }
}

// store_channels_last (what model.to(memory_format=torch.channels_last) does): every 4-D parameter gets NHWC strides
// (one input channel included, where contiguous(ChannelsLast) would keep NCHW ones) and keeps its values; the
// channels-last kernels then compute exactly what they computed from NCHW-stored weights, and each weight's gradient
// follows its strides.
TEST(ConvKernels, ChannelsLastStorageKeepsValuesAndTrainsExactlyTheSame) {
  for (const std::string name : {"net", "resnet18"}) {
    ModelConfig cfg;
    cfg.name = ModelChoice{name};
    cfg.dropout = 0;
    cfg.memory_format = MemoryFormat::ChannelsLast;
    std::vector<std::shared_ptr<Classifier>> models;
    for (int i = 0; i < 2; ++i) {
      torch::manual_seed(3);
      models.push_back(make_model(cfg));
    }
    store_channels_last(*models[1]);
    const auto before = models[0]->parameters(), after = models[1]->parameters();
    int converted = 0;
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_TRUE(torch::equal(before[i], after[i])) << name << " parameter " << i;
      if (after[i].dim() != 4) continue;
      EXPECT_EQ(after[i].suggest_memory_format(), torch::MemoryFormat::ChannelsLast) << name << " parameter " << i;
      ++converted;
    }
    EXPECT_EQ(converted, name == "net" ? 2 : 20) << name;

    torch::manual_seed(4);
    const auto x = torch::randn({8, 1, 28, 28});
    const auto y = torch::randint(0, 10, {8});
    std::vector<torch::Tensor> outs;
    for (auto& model : models) {
      auto out = model->forward(x);
      (model->outputs_log_probs() ? torch::nll_loss(out, y) : torch::cross_entropy_loss(out, y)).backward();
      outs.push_back(out.detach());
    }
    EXPECT_TRUE(torch::equal(outs[0], outs[1])) << name;
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_TRUE(torch::equal(before[i].grad(), after[i].grad())) << name << " gradient " << i;
      EXPECT_EQ(after[i].grad().strides(), after[i].strides()) << name << " gradient " << i;
    }
  }
}

}  // namespace
}  // namespace ddp
