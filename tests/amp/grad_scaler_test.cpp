// GradScaler unit behaviour.
//
// One host read per step (step()'s), once-per-step unscale, misuse errors, disabled mode, and the CPU unscale
// kernel's semantics (scaled grads written even when non-finite, bf16 via float32).
#include "amp/grad_scaler.h"
#include "optim/optimizer.h"
#include "tests/support/op_count.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace ddp::test {
namespace {

// A Linear 3->2 with a fixed batch; backward of scaler.scale(loss), optionally with an inf in one grad.
struct Tiny {
  torch::nn::Linear model{nullptr};
  std::unique_ptr<torch::optim::SGD> opt;
  torch::Tensor x, y;

  explicit Tiny(uint64_t seed, double lr = 0.1) {
    torch::manual_seed(seed);
    model = torch::nn::Linear(3, 2);
    opt = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
    x = torch::randn({4, 3});
    y = torch::randn({4, 2});
  }
  void backward(GradScaler& scaler, bool inject_inf) {
    opt->zero_grad();
    scaler.scale(torch::mse_loss(model->forward(x), y)).backward();
    if (inject_inf) model->weight.grad().view({-1})[0].fill_(INFINITY);
  }
  torch::Tensor weight() const { return model->weight.detach().clone(); }
};

// As Python's GradScaler: unscale() and update() leave found_inf and the scale on the device; step() reads found_inf
// once, and skips the optimizer step (and counts it) when it is set.
TEST(GradScalerTest, OnlyStepReadsTheDeviceAndItDecidesSkipAndUpdate) {
  AmpConfig o;
  o.growth_interval = 3;
  GradScaler scaler(o);
  Tiny t(1);
  for (const bool overflow : {false, true}) {
    t.backward(scaler, overflow);
    const auto before = t.weight();
    {
      OpCount ops;
      scaler.unscale(*t.opt);
      EXPECT_EQ(ops.host_reads(), 0);
    }
    {
      OpCount ops;
      scaler.step(*t.opt);
      EXPECT_EQ(ops.host_reads(), 1);
    }
    EXPECT_EQ(scaler.found_inf(), overflow);
    EXPECT_EQ(torch::equal(t.weight(), before), overflow);
    {
      OpCount ops;
      scaler.update();
      EXPECT_EQ(ops.host_reads(), 0);
    }
    EXPECT_FALSE(scaler.found_inf());  // update() starts the next iteration
  }
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.get_scale(), 32768.0);  // backed off once
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

// An optimizer that takes found_inf (fused SGD) gets it on the device: step() reads nothing, an overflow leaves the
// weights as they were and is counted, and a clean step trains.
TEST(GradScalerTest, FusedSgdSkipsOnTheDeviceWithoutAHostRead) {
  torch::manual_seed(1);
  auto model = torch::nn::Linear(3, 2);
  OptimizerConfig cfg;
  cfg.hyper.set("momentum", 0.9);
  cfg.fused = true;
  const auto opt = make_optimizer(cfg, 0.1, model->parameters());
  GradScaler scaler;
  const auto x = torch::randn({4, 3}), y = torch::randn({4, 2});
  for (const bool overflow : {true, false}) {
    opt->zero_grad();
    scaler.scale(torch::mse_loss(model->forward(x), y)).backward();
    if (overflow) model->weight.grad().view({-1})[0].fill_(INFINITY);
    const auto before = model->weight.detach().clone();
    {
      OpCount ops;
      scaler.step(*opt);
      EXPECT_EQ(ops.host_reads(), 0);
      EXPECT_EQ(ops.of("aten::_fused_sgd_"), 1);
    }
    EXPECT_EQ(scaler.found_inf(), overflow);
    EXPECT_EQ(torch::equal(model->weight, before), overflow);
    scaler.update();
  }
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

// With a power-of-two scale and no overflow, scaling commutes with float32 rounding: unscaled gradients equal
// the unscaled backward's bit for bit, and step() after an explicit unscale() does not unscale again.
TEST(GradScalerTest, UnscaleOncePerStepExactForPowerOfTwoScale) {
  Tiny plain(4), scaled(4);
  plain.opt->zero_grad();
  torch::mse_loss(plain.model->forward(plain.x), plain.y).backward();
  GradScaler scaler;
  scaled.backward(scaler, false);
  EXPECT_FALSE(torch::equal(scaled.model->weight.grad(), plain.model->weight.grad()));
  scaler.unscale(*scaled.opt);
  EXPECT_TRUE(torch::equal(scaled.model->weight.grad(), plain.model->weight.grad()));
  EXPECT_TRUE(torch::equal(scaled.model->bias.grad(), plain.model->bias.grad()));
  EXPECT_THROW(scaler.unscale(*scaled.opt), std::logic_error);
  scaler.step(*scaled.opt);
  EXPECT_FALSE(scaler.found_inf());
  EXPECT_TRUE(torch::equal(scaled.model->weight.grad(), plain.model->weight.grad()));
  plain.opt->step();
  EXPECT_TRUE(torch::equal(scaled.model->weight, plain.model->weight));
  EXPECT_THROW(scaler.step(*scaled.opt), std::logic_error);
  EXPECT_THROW(scaler.unscale(*scaled.opt), std::logic_error);
  scaler.update();
  EXPECT_THROW(scaler.update(), std::logic_error);  // no inf checks since the last update
}

TEST(GradScalerTest, MisuseBeforeScaleAndBadOptionsThrow) {
  Tiny t(5);
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);  // init_scale until the first scale()
  EXPECT_THROW(scaler.unscale(*t.opt), std::logic_error);
  EXPECT_THROW(scaler.step(*t.opt), std::logic_error);
  EXPECT_THROW(scaler.update(), std::logic_error);
  AmpConfig bad;
  bad.growth_factor = 1.0;
  EXPECT_THROW(GradScaler{bad}, std::invalid_argument);
  bad = {};
  bad.backoff_factor = 1.0;
  EXPECT_THROW(GradScaler{bad}, std::invalid_argument);
  EXPECT_THROW(GradScaler{}.load_state_dict(c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get())),
               std::runtime_error);
}

// A checkpoint's scaler state passes the range check with any growth_interval amp.growth_interval takes (2**31 - 1,
// a common way to turn growth off, and its largest), so that a run resumes from its own checkpoints; a tracker of
// 2**31 - 2 is that interval's last before growth. Zero, NaN and a tracker past int32 (its tensor's type) are refused.
TEST(GradScalerTest, StateRangesAreTheConfigsRanges) {
  AmpConfig amp;
  amp.growth_interval = int64_t{1} << 31;
  GradScaler scaler(amp);
  auto state = scaler.state_dict();
  state.insert_or_assign("growth_interval", int64_t{2147483647});
  state.insert_or_assign("_growth_tracker", int64_t{2147483646});
  EXPECT_NO_THROW(GradScaler::check_state_dict(state));
  state.insert_or_assign("growth_interval", static_cast<int64_t>(kMaxSteps));
  EXPECT_NO_THROW(GradScaler::check_state_dict(state));
  GradScaler resumed(amp);
  resumed.load_state_dict(state);
  EXPECT_EQ(resumed.options().growth_interval, static_cast<int64_t>(kMaxSteps));
  for (const auto& [key, bad] :
       std::vector<std::pair<std::string, c10::IValue>>{{"growth_interval", int64_t{0}},
                                                        {"growth_interval", static_cast<int64_t>(kMaxSteps) + 1},
                                                        {"_growth_tracker", int64_t{3000000000}},
                                                        {"scale", 0.0},
                                                        {"scale", std::nan("")}}) {
    auto broken = scaler.state_dict();
    broken.insert_or_assign(key, bad);
    EXPECT_THROW(GradScaler::check_state_dict(broken), std::runtime_error) << key << " = " << bad;
  }
}

TEST(GradScalerTest, DisabledIsAPassThrough) {
  GradScaler scaler(AmpConfig{}, /*enabled=*/false);
  Tiny t(6);
  const auto loss = torch::mse_loss(t.model->forward(t.x), t.y);
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  loss.backward();
  const auto grad = t.model->weight.grad().clone();
  scaler.unscale(*t.opt);
  EXPECT_TRUE(torch::equal(t.model->weight.grad(), grad));
  const auto before = t.weight();
  scaler.step(*t.opt);
  EXPECT_FALSE(scaler.found_inf());
  EXPECT_FALSE(torch::equal(t.weight(), before));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.state_dict().size(), 0u);
}

// unscale() flags non-finite gradients and still writes every value times 1/scale (float32 opmath, as ATen's kernel),
// for float32 and bf16 gradients alike.
TEST(GradScalerTest, UnscaleWritesScaledValuesAndFlagsNonFinite) {
  AmpConfig o;
  o.init_scale = 10.0;
  GradScaler scaler(o);
  auto p32 = torch::zeros({3}).requires_grad_();
  auto p16 = torch::zeros({3}, torch::kBFloat16).requires_grad_();
  p32.mutable_grad() = torch::tensor({3.0f, INFINITY, -5.0f});
  p16.mutable_grad() = torch::tensor({3.0f, 7.0f, 1.5f}).to(torch::kBFloat16);
  const auto g32_in = p32.grad().clone(), bf16_in = p16.grad().clone();
  torch::optim::SGD opt({p32, p16}, torch::optim::SGDOptions(0.1));
  scaler.scale(torch::ones({}));
  scaler.unscale(opt);
  EXPECT_TRUE(scaler.found_inf());
  const auto inv_scale = torch::full({1}, 10.0, torch::kDouble).reciprocal().to(torch::kFloat);
  EXPECT_TRUE(torch::equal(p32.grad(), g32_in * inv_scale));  // inf * 0.1 stays inf, others scaled
  EXPECT_TRUE(torch::equal(p16.grad(), (bf16_in.to(torch::kFloat) * inv_scale).to(torch::kBFloat16)));
  scaler.step(opt);
  EXPECT_TRUE(scaler.found_inf());
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 5.0);  // backed off
  p32.mutable_grad() = torch::ones({3});
  p16.mutable_grad() = torch::ones({3}, torch::kBFloat16);
  scaler.scale(torch::ones({}));
  scaler.unscale(opt);
  EXPECT_FALSE(scaler.found_inf());
  p32.mutable_grad() = torch::tensor({1.0f, NAN, 0.0f});
  scaler.step(opt);
  scaler.update();
  scaler.scale(torch::ones({}));
  scaler.unscale(opt);
  EXPECT_TRUE(scaler.found_inf());  // NaN counts as non-finite
}

TEST(GradScalerTest, Fp16GradientsAreRefusedLikePyTorch) {
  GradScaler scaler;
  auto p = torch::zeros({2}, torch::kHalf).requires_grad_();
  p.mutable_grad() = torch::ones({2}, torch::kHalf);
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  scaler.scale(torch::ones({}));
  EXPECT_THROW(scaler.unscale(opt), std::invalid_argument);
}

}  // namespace
}  // namespace ddp::test
