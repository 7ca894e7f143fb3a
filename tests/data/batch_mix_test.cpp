// Tests: MixUp, CutMix and their random choice against torchvision.transforms.v2 (tests/python/batch_mix_reference.py),
// the soft-target loss against torch.nn.functional.cross_entropy, and the keyed draw.
#include "data/batch_mix.h"
#include "tests/support/test_support.h"
#include "train/training_loss.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace ddp::test {
namespace {

constexpr int64_t kB = 6, kC = 3, kH = 11, kW = 13, kK = 5;

torch::Tensor read_tensor(const std::string& path, c10::IntArrayRef sizes, torch::ScalarType type) {
  std::string bytes = read_file(path);
  const torch::Tensor t = torch::from_blob(bytes.data(), sizes, type).clone();
  EXPECT_EQ(static_cast<size_t>(t.numel() * t.element_size()), bytes.size()) << path;
  return t;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

class BatchMixOracle : public ::testing::Test {
 protected:
  // One run of the oracle for every check (importing torchvision takes seconds).
  void SetUp() override {
    if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << "no torch and torchvision in " << python();
    const CommandResult r =
        run_command(python() + " " + shell_quote(source_dir() + "/tests/python/batch_mix_reference.py") + " " +
                    shell_quote(dir_.path()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    images_ = read_tensor(dir_ / "input.images.bin", {kB, kC, kH, kW}, torch::kFloat32);
    labels_ = read_tensor(dir_ / "input.labels.bin", {kB}, torch::kInt64);
  }
  torch::Tensor expected_images(const std::string& name) const {
    return read_tensor(dir_ / (name + ".images.bin"), {kB, kC, kH, kW}, torch::kFloat32);
  }
  torch::Tensor expected_targets(const std::string& name) const {
    return read_tensor(dir_ / (name + ".targets.bin"), {kB, kK}, torch::kFloat32);
  }
  // cases.txt's lines by name: the words after the name.
  std::map<std::string, std::string> cases() const {
    std::map<std::string, std::string> out;
    for (const std::string& line : read_lines(dir_ / "cases.txt")) {
      const size_t space = line.find(' ');
      out[line.substr(0, space)] = line.substr(space + 1);
    }
    return out;
  }
  std::map<std::string, double> losses() const {
    std::map<std::string, double> out;
    for (const std::string& line : read_lines(dir_ / "losses.txt")) {
      std::istringstream in(line);
      std::string name;
      double v = 0;
      in >> name >> v;
      out[name] = v;
    }
    return out;
  }
  void expect_equal(const MixedBatch& got, const std::string& name) const {
    const torch::Tensor images = expected_images(name), targets = expected_targets(name);
    EXPECT_TRUE(torch::equal(got.images, images)) << name << ": images differ by " << max_diff(got.images, images);
    ASSERT_TRUE(got.targets.defined()) << name;
    EXPECT_TRUE(torch::equal(got.targets, targets)) << name << ": targets differ by " << max_diff(got.targets, targets);
  }

  void mixup_at_a_fixed_lambda() const;
  void cutmix_at_a_fixed_lambda_and_centre() const;
  void draws_from_a_seeded_generator() const;
  void soft_target_loss() const;

  TempDir dir_;
  torch::Tensor images_, labels_;
};

void BatchMixOracle::mixup_at_a_fixed_lambda() const {
  std::istringstream line(cases().at("mixup_fixed"));
  std::string kind;
  MixDraw d;
  line >> kind >> d.lam;
  d.kind = MixDraw::Kind::MixUp;
  ASSERT_EQ(kind, "mixup");
  expect_equal(BatchMix(1.0, 0, kK).apply(images_, labels_, d), "mixup_fixed");
}

void BatchMixOracle::cutmix_at_a_fixed_lambda_and_centre() const {
  for (const std::string name : {"cutmix_fixed", "cutmix_edge"}) {
    std::istringstream line(cases().at(name));
    std::string kind;
    double lam = 0, lam_adjusted = 0;
    int64_t r_x = 0, r_y = 0;
    MixBox box;
    line >> kind >> lam >> r_x >> r_y >> lam_adjusted >> box.x1 >> box.y1 >> box.x2 >> box.y2;
    ASSERT_EQ(kind, "cutmix");
    // torchvision draws lam as float32 (Beta over float32 concentrations).
    const MixDraw d = cutmix_params(static_cast<float>(lam), r_x, r_y, kH, kW);
    EXPECT_EQ(d.kind, MixDraw::Kind::CutMix);
    EXPECT_EQ(d.lam, lam_adjusted) << name;
    EXPECT_EQ(std::vector<int64_t>({d.box.x1, d.box.y1, d.box.x2, d.box.y2}),
              std::vector<int64_t>({box.x1, box.y1, box.x2, box.y2}))
        << name;
    expect_equal(BatchMix(0, 1.0, kK).apply(images_, labels_, d), name);
  }
}

void BatchMixOracle::draws_from_a_seeded_generator() const {
  // RandomChoice([MixUp, CutMix]) after torch.manual_seed(s): the same draws from a generator seeded s, so the
  // choice, lam and CutMix's centre are torchvision's, not only the transforms.
  int mixups = 0, cutmixes = 0;
  for (const auto& [name, words] : cases()) {
    std::istringstream line(words);
    std::string kind;
    double mixup_alpha = 0, cutmix_alpha = 0;
    uint64_t seed = 0;
    line >> kind >> mixup_alpha >> cutmix_alpha >> seed;
    if (kind != "seeded") continue;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const MixDraw d = draw_mix(mixup_alpha, cutmix_alpha, kH, kW, gen);
    (d.kind == MixDraw::Kind::MixUp ? mixups : cutmixes) += 1;
    expect_equal(BatchMix(mixup_alpha, cutmix_alpha, kK).apply(images_, labels_, d), name);
  }
  EXPECT_GE(mixups, 2);
  EXPECT_GE(cutmixes, 2);
}

void BatchMixOracle::soft_target_loss() const {
  const torch::Tensor logits = read_tensor(dir_ / "logits.bin", {kB, kK}, torch::kFloat32);
  const torch::Tensor log_probs = torch::log_softmax(logits, 1);
  const torch::Tensor targets = expected_targets("mixup_fixed");
  const std::map<std::string, double> want = losses();
  double worst = 0;
  for (const double ls : {0.0, 0.1}) {
    const std::string suffix = ls == 0 ? "_0.0" : "_0.1";
    const double soft = training_loss(logits, labels_, targets, ls, false).item<double>();
    const double soft_lp = training_loss(log_probs, labels_, targets, ls, true).item<double>();
    const double hard = training_loss(logits, labels_, {}, ls, false).item<double>();
    for (const auto& [name, got] :
         {std::pair{"soft_logits", soft}, std::pair{"soft_logprobs", soft_lp}, std::pair{"hard_logits", hard}}) {
      // training_loss calls the ATen op F.cross_entropy calls (cross_entropy_loss, nll_loss) on the same float32
      // logits in the same LibTorch: the same kernels, too small to be split over threads, so the same bits.
      const double diff = std::abs(got - want.at(name + suffix));
      EXPECT_EQ(got, want.at(name + suffix)) << name << suffix;
      worst = std::max(worst, diff);
    }
  }
  EXPECT_EQ(training_loss(log_probs, labels_, {}, 0, true).item<double>(), want.at("hard_logprobs_0.0"));
  // Label smoothing changes the soft-target loss (the smoothed path is the one compared).
  EXPECT_NE(want.at("soft_logits_0.0"), want.at("soft_logits_0.1"));
  EXPECT_EQ(training_correct(logits, labels_, targets).item<int64_t>(), static_cast<int64_t>(want.at("correct_soft")));
  std::cout << "soft-target loss: max |ddptrain - F.cross_entropy| = " << worst << "\n";
}

// MixUp (fixed lambda), CutMix (fixed lambda and centre, one box clamped at the corner) and RandomChoice of the two
// (draws from torch.manual_seed(s)) equal torchvision's images and targets to the bit; the soft-target loss with
// label smoothing equals F.cross_entropy to the bit.
TEST_F(BatchMixOracle, MixUpCutMixTheirDrawsAndTheSoftTargetLossEqualTorchvisionAndPyTorch) {
  mixup_at_a_fixed_lambda();
  cutmix_at_a_fixed_lambda_and_centre();
  draws_from_a_seeded_generator();
  soft_target_loss();
}

TEST(BatchMix, OffIsANoOpAndTheKeyedDrawIsReproducible) {
  const torch::Tensor images = torch::randn({4, 1, 8, 8}), labels = torch::tensor({0, 1, 2, 1});
  const MixedBatch off = BatchMix(0, 0, 3).apply(images, labels, uint64_t{7});
  EXPECT_TRUE(off.images.is_same(images));
  EXPECT_FALSE(off.targets.defined());
  const BatchMix mix(0.2, 1.0, 3);
  const MixedBatch a = mix.apply(images, labels, mix_key(1, 0, 5, 0, 0));
  const MixedBatch b = mix.apply(images, labels, mix_key(1, 0, 5, 0, 0));
  EXPECT_TRUE(torch::equal(a.images, b.images));
  EXPECT_TRUE(torch::equal(a.targets, b.targets));
  // Each targets row is a distribution.
  EXPECT_TRUE(torch::allclose(a.targets.sum(1), torch::ones({4})));
  // Each part of the key changes it.
  const std::set<uint64_t> keys = {mix_key(1, 0, 5, 0, 0), mix_key(2, 0, 5, 0, 0), mix_key(1, 1, 5, 0, 0),
                                   mix_key(1, 0, 6, 0, 0), mix_key(1, 0, 5, 1, 0), mix_key(1, 0, 5, 0, 1)};
  EXPECT_EQ(keys.size(), 6u);
}

}  // namespace
}  // namespace ddp::test
