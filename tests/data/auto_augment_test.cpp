// The automatic augmentation ops and policies, ColorJitter and RandomErasing against torchvision 0.26
// (tests/python/auto_augment_reference.py): each op at fixed parameters to the pixel, each policy's draws from one
// seed and its output, the draws' distributions, ColorJitter's output and draws from one seed, RandomErasing's box draw
// for draw and F.erase.
#include "config/config.h"
#include "data/auto_augment.h"
#include "data/auto_augment_ops.h"
#include "data/batch_rows.h"
#include "data/random_erasing.h"
#include "data/sample_transforms.h"
#include "tests/support/test_support.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>

namespace ddp::test {
namespace {

// One intra-op thread, as on the loader threads and in the reference script: a reduction (adjust_contrast's mean)
// sums in one order.
class AugmentOneThread {
 public:
  AugmentOneThread() : before_(at::get_num_threads()) { at::set_num_threads(1); }
  ~AugmentOneThread() { at::set_num_threads(before_); }

 private:
  int before_;
};

// The reference script's cases of `mode`, its files written into `dir`; no case (and a test failure) when it fails.
nlohmann::json augment_cases(const std::string& mode, const TempDir& dir) {
  const CommandResult r =
      run_command(shell_quote(python()) + " " + shell_quote(source_dir() + "/tests/python/auto_augment_reference.py") +
                  " " + mode + " " + shell_quote(dir.path()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return nlohmann::json::array();
  return nlohmann::json::parse(read_file(dir / "cases.json"));
}

torch::Tensor augment_raw(const std::string& path, const std::vector<int64_t>& shape,
                          torch::ScalarType type = torch::kUInt8) {
  const std::string bytes = read_file(path);
  torch::Tensor t = torch::empty(shape, type);
  EXPECT_EQ(bytes.size(), static_cast<size_t>(t.nbytes())) << path;
  std::memcpy(t.data_ptr(), bytes.data(), std::min(bytes.size(), static_cast<size_t>(t.nbytes())));
  return t;
}

// The script's images and their shapes.
const std::map<std::string, std::vector<int64_t>>& augment_images() {
  static const std::map<std::string, std::vector<int64_t>> shapes = {
      {"odd", {3, 37, 23}}, {"square", {3, 32, 32}}, {"low", {3, 17, 29}}};
  return shapes;
}

AugOp aug_op_named(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(AugOp::Invert); ++k)
    if (aug_op_name(static_cast<AugOp>(k)) == name) return static_cast<AugOp>(k);
  ADD_FAILURE() << "no op " << name;
  return AugOp::Identity;
}

torch::Tensor augment_functional(const nlohmann::json& c, const torch::Tensor& image) {
  const std::string fn = c["fn"];
  const GridInterpolation interpolation =
      c.value("interp", "nearest") == "bilinear" ? GridInterpolation::Bilinear : GridInterpolation::Nearest;
  if (fn == "affine") {
    std::optional<std::array<double, 2>> center;
    if (!c["center"].is_null()) center = std::array<double, 2>{c["center"][0], c["center"][1]};
    return affine_op(image, c["angle"], {c["translate"][0], c["translate"][1]}, c["scale"],
                     {c["shear"][0], c["shear"][1]}, interpolation, center);
  }
  if (fn == "rotate") return rotate_op(image, c["angle"], interpolation);
  if (fn == "aug_op") return apply_aug_op(image, aug_op_named(c["op"]), c["magnitude"], interpolation);
  if (fn == "brightness") return brightness_op(image, c["arg"]);
  if (fn == "saturation") return saturation_op(image, c["arg"]);
  if (fn == "contrast") return contrast_op(image, c["arg"]);
  if (fn == "sharpness") return sharpness_op(image, c["arg"]);
  if (fn == "hue") return hue_op(image, c["arg"]);
  if (fn == "posterize") return posterize_op(image, c["arg"].get<int64_t>());
  if (fn == "solarize") return solarize_op(image, c["arg"]);
  if (fn == "autocontrast") return autocontrast_op(image);
  if (fn == "equalize") return equalize_op(image);
  if (fn == "invert") return invert_op(image);
  ADD_FAILURE() << "no op " << fn;
  return image;
}

// Every op at fixed parameters, on odd, square and low-contrast images (one with a constant channel), against
// torchvision.transforms.v2.functional: pixel-equal (the same ATen operations in the same order).
TEST(AutoAugmentOps, EqualTorchvisionFunctionalOps) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  AugmentOneThread one_thread;
  TempDir dir;
  const nlohmann::json cases = augment_cases("ops", dir);
  ASSERT_GT(cases.size(), 300u);
  std::map<std::string, int64_t> worst;  // by op: the largest pixel difference
  for (const auto& c : cases) {
    const std::string src = c["src"];
    const torch::Tensor image = augment_raw(dir / (src + ".chw"), augment_images().at(src));
    const torch::Tensor got = augment_functional(c, image);
    const torch::Tensor expected = augment_raw(dir / c["out"].get<std::string>(), augment_images().at(src));
    ASSERT_EQ(got.sizes(), expected.sizes()) << c.dump();
    const int64_t diff = (got.to(torch::kInt32) - expected.to(torch::kInt32)).abs().max().item<int64_t>();
    // The same pixels from the image's channels-last layout (a training crop's resize hands the ops that layout).
    EXPECT_TRUE(torch::equal(augment_functional(c, image.permute({1, 2, 0}).contiguous().permute({2, 0, 1})), got))
        << "channels last: " << c.dump();
    const std::string name = c["fn"] == "aug_op" ? "aug_op " + c["op"].get<std::string>() : c["fn"].get<std::string>();
    worst[name] = std::max(worst[name], diff);
    EXPECT_EQ(diff, 0) << c.dump();
  }
  EXPECT_EQ(worst.size(), 12u + 15u);  // every functional op and every policy op was compared
  std::cout << "[ figures ] max |pixel difference| by op:";
  for (const auto& [name, d] : worst) std::cout << " " << name << "=" << d;
  std::cout << "\n";
}

AutoAugmentOptions augment_policy_options(const std::string& name) {
  AutoAugmentOptions o;
  if (name.rfind("ta_wide", 0) == 0) o.policy = AutoAugmentChoice::TaWide;
  if (name == "ta_wide_bilinear") o.interpolation = PolicyInterpolation::Bilinear;
  if (name.rfind("rand_augment", 0) == 0) o.policy = AutoAugmentChoice::RandAugment;
  if (name == "rand_augment_m15_n3") o.ra_magnitude = 15, o.ra_num_ops = 3;
  if (name == "imagenet") o.policy = AutoAugmentChoice::ImageNet;
  if (name.rfind("augmix", 0) == 0) o.policy = AutoAugmentChoice::AugMix;
  if (name == "augmix_s7") o.augmix_severity = 7;
  if (name == "augmix_nearest") o.interpolation = PolicyInterpolation::Nearest;
  return o;
}

// Each policy from torch.manual_seed(seed) against an at::Generator seeded the same: the same ops with the same
// magnitudes (the draws, in torchvision's order), the generator left in the same state, and the same pixels; also
// with the interpolation given (TrivialAugmentWide bilinear, AugMix nearest, data.auto_augment_interpolation).
TEST(AutoAugmentPolicies, SeededDrawsAndOutputsEqualTorchvision) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  AugmentOneThread one_thread;
  TempDir dir;
  const nlohmann::json cases = augment_cases("policies", dir);
  ASSERT_EQ(cases.size(), 8u * 2 * 40);
  std::map<std::string, int64_t> worst;
  for (const auto& c : cases) {
    const std::string src = c["src"], name = c["policy"];
    const std::vector<int64_t>& shape = augment_images().at(src);
    const torch::Tensor image = augment_raw(dir / (src + ".chw"), shape);
    const AutoAugmentPolicy policy(augment_policy_options(name));
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(c["seed"].get<uint64_t>());
    const PolicyDraw draw = policy.draw(shape[1], shape[2], gen);
    EXPECT_EQ(torch::randint(int64_t{1} << 31, {}, gen, torch::kInt64).item<int64_t>(), c["after"].get<int64_t>())
        << c.dump();
    std::vector<std::pair<std::string, double>> applied;
    for (const auto& chain : draw.chains)
      for (const OpDraw& op : chain) applied.emplace_back(aug_op_name(op.op), op.magnitude);
    ASSERT_EQ(applied.size(), c["applied"].size()) << c.dump();
    for (size_t k = 0; k < applied.size(); ++k) {
      EXPECT_EQ(applied[k].first, c["applied"][k][0].get<std::string>()) << c.dump();
      EXPECT_EQ(applied[k].second, c["applied"][k][1].get<double>()) << c.dump();
    }
    const torch::Tensor got = policy.apply(image, draw);
    const torch::Tensor expected = augment_raw(dir / c["out"].get<std::string>(), shape);
    const int64_t diff = (got.to(torch::kInt32) - expected.to(torch::kInt32)).abs().max().item<int64_t>();
    worst[name] = std::max(worst[name], diff);
    EXPECT_EQ(diff, 0) << c.dump();
    EXPECT_TRUE(torch::equal(policy.apply(image.permute({1, 2, 0}).contiguous().permute({2, 0, 1}), draw), got))
        << "channels last: " << c.dump();
  }
  std::cout << "[ figures ] max |pixel difference| by policy:";
  for (const auto& [name, d] : worst) std::cout << " " << name << "=" << d;
  std::cout << "\n";
}

// Pearson's chi-square of counts against equal expected counts.
double augment_chi_square(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  const double expected = static_cast<double>(total) / static_cast<double>(counts.size());
  double chi2 = 0;
  for (int64_t n : counts) chi2 += (static_cast<double>(n) - expected) * (static_cast<double>(n) - expected) / expected;
  return chi2;
}

// How far `negated` of `n` fair coin flips lie from n / 2, in standard deviations.
double augment_sign_z(int64_t negated, int64_t n) {
  return std::abs(static_cast<double>(negated) - n / 2.0) / std::sqrt(n / 4.0);
}

// Counts of a policy's draws: ops, magnitude bins of the ops with magnitudes, signs of the signed ones; and each
// drawn magnitude checked against the op's magnitudes at its bin and its sign.
struct AugmentCounts {
  std::vector<int64_t> ops, bins;
  int64_t signed_draws = 0, negated = 0;
};

AugmentCounts augment_count_draws(const AutoAugmentPolicy& policy, int64_t draws, uint64_t seed) {
  AugmentCounts counts;
  counts.ops.assign(policy.ops().size(), 0);
  counts.bins.assign(static_cast<size_t>(policy.magnitude_bins()), 0);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (int64_t i = 0; i < draws; ++i)
    for (const auto& chain : policy.draw(32, 32, gen).chains)
      for (const OpDraw& d : chain) {
        const auto at = std::find(policy.ops().begin(), policy.ops().end(), d.op);
        ++counts.ops[static_cast<size_t>(at - policy.ops().begin())];
        if (!policy.has_magnitudes(d.op)) {
          EXPECT_EQ(d.bin, -1);
          continue;
        }
        ++counts.bins.at(static_cast<size_t>(d.bin));
        const double m = policy.magnitudes(d.op, 32, 32).at(static_cast<size_t>(d.bin));
        EXPECT_EQ(d.magnitude, d.negated ? -m : m);
        if (!policy.signed_op(d.op)) {
          EXPECT_FALSE(d.negated);
          continue;
        }
        ++counts.signed_draws;
        counts.negated += d.negated;
      }
  return counts;
}

// 20000 draws of each policy: the op uniform over torchvision's list (TrivialAugmentWide, RandAugment: 14 ops;
// AugMix: 13), the bin uniform over 31 (TrivialAugmentWide) or over the severity (AugMix) or RandAugment's magnitude,
// a signed op's sign a fair coin, AutoAugment's sub-policy uniform over 25. Chi-square thresholds near the 1e-4 tail
// (df 2: 18.4, df 3: 21.1, df 12: 39.1, df 13: 40.9, df 24: 58.6, df 30: 67.6), fixed seeds: a missing op, a bin count
// of 30 or 32, or a sign never flipped fails by hundreds.
TEST(AutoAugmentPolicies, DrawsFollowTorchvisionsDistributions) {
  const AutoAugmentPolicy ta({AutoAugmentChoice::TaWide});
  const AugmentCounts t = augment_count_draws(ta, 20000, 11);
  ASSERT_EQ(t.ops.size(), 14u);
  ASSERT_EQ(t.bins.size(), 31u);
  const double ta_ops = augment_chi_square(t.ops), ta_bins = augment_chi_square(t.bins);
  EXPECT_LT(ta_ops, 40.9);
  EXPECT_LT(ta_bins, 67.6);
  EXPECT_GT(t.signed_draws, 20000 * 9 / 14 * 9 / 10);  // 9 of the 14 ops are signed
  EXPECT_LT(augment_sign_z(t.negated, t.signed_draws), 4.0);

  const AutoAugmentPolicy ra({AutoAugmentChoice::RandAugment, 13, 2, 3});
  const AugmentCounts r = augment_count_draws(ra, 10000, 12);
  ASSERT_EQ(r.ops.size(), 14u);
  const double ra_ops = augment_chi_square(r.ops);
  EXPECT_LT(ra_ops, 40.9);
  for (size_t b = 0; b < r.bins.size(); ++b) EXPECT_EQ(r.bins[b] > 0, b == 13) << b;  // always the magnitude's bin
  EXPECT_LT(augment_sign_z(r.negated, r.signed_draws), 4.0);

  const AutoAugmentPolicy am({AutoAugmentChoice::AugMix, 9, 2, 4});
  const AugmentCounts a = augment_count_draws(am, 3000, 13);  // 3 chains of 1 to 3 ops: about 18000 ops
  ASSERT_EQ(a.ops.size(), 13u);
  const double am_ops = augment_chi_square(a.ops);
  EXPECT_LT(am_ops, 39.1);
  const std::vector<int64_t> severity(a.bins.begin(), a.bins.begin() + 4);
  const double am_bins = augment_chi_square(severity);
  EXPECT_LT(am_bins, 21.1);                                                 // df 3
  for (size_t b = 4; b < a.bins.size(); ++b) EXPECT_EQ(a.bins[b], 0) << b;  // torch.randint(severity, ())
  EXPECT_LT(augment_sign_z(a.negated, a.signed_draws), 4.0);

  const AutoAugmentPolicy aa({AutoAugmentChoice::ImageNet});
  std::vector<int64_t> sub_policies(25, 0), depths(4, 0);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(14);
  for (int i = 0; i < 20000; ++i) ++sub_policies.at(static_cast<size_t>(aa.draw(32, 32, gen).sub_policy));
  const double aa_policies = augment_chi_square(sub_policies);
  EXPECT_LT(aa_policies, 58.6);
  for (int i = 0; i < 3000; ++i)
    for (const auto& chain : am.draw(32, 32, gen).chains) ++depths.at(chain.size());
  EXPECT_EQ(depths[0], 0);
  const double am_depths = augment_chi_square({depths[1], depths[2], depths[3]});
  EXPECT_LT(am_depths, 18.4);  // df 2
  std::cout << "[ figures ] chi-square: ta_wide ops " << ta_ops << " (df 13), bins " << ta_bins
            << " (df 30); rand_augment ops " << ra_ops << "; augmix ops " << am_ops << " (df 12), bins " << am_bins
            << " (df 3), depths " << am_depths << " (df 2); imagenet sub-policies " << aa_policies
            << " (df 24); sign z: ta_wide " << augment_sign_z(t.negated, t.signed_draws) << "\n";
}

// "none" draws nothing and returns the image; p = 0 erasing draws nothing.
TEST(AutoAugmentPolicies, NoneAndNoErasingDrawNothing) {
  const torch::Tensor image = torch::randint(0, 256, {3, 8, 8}, torch::kUInt8);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3), fresh = at::make_generator<at::CPUGeneratorImpl>(3);
  const AutoAugmentPolicy none({AutoAugmentChoice::None});
  EXPECT_FALSE(none.active());
  EXPECT_TRUE(torch::equal(none(image, gen), image));
  EXPECT_FALSE(RandomErasing(0.0).draw(8, 8, gen).has_value());
  EXPECT_EQ(torch::randint(1000000, {}, gen, torch::kInt64).item<int64_t>(),
            torch::randint(1000000, {}, fresh, torch::kInt64).item<int64_t>());
}

// v2.ColorJitter(brightness, contrast, saturation, hue) from torch.manual_seed(seed) against the color_jitter row's op
// from an at::Generator seeded the same: the same pixels (the same factors applied in the same order) and the
// generator left in the same state; keys at 0 are left out as torchvision leaves out None.
TEST(ColorJitterOp, SeededOutputsAndDrawsEqualTorchvision) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  AugmentOneThread one_thread;
  TempDir dir;
  const nlohmann::json cases = augment_cases("jitter", dir);
  ASSERT_EQ(cases.size(), 5u * 3u * 12u);
  int64_t changed = 0;
  for (const auto& c : cases) {
    DataConfig data;
    data.jitter_brightness = c["jitter"][0];
    data.jitter_contrast = c["jitter"][1];
    data.jitter_saturation = c["jitter"][2];
    data.jitter_hue = c["jitter"][3];
    const std::unique_ptr<const PixelTransform> jitter = color_jitter_transform().make(data);
    ASSERT_NE(jitter, nullptr);
    const std::string src = c["src"];
    const torch::Tensor image = augment_raw(dir / (src + ".chw"), augment_images().at(src));
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(c["seed"].get<uint64_t>());
    TransformedSample sample{image, std::nullopt};
    jitter->apply(sample, gen);
    const torch::Tensor expected = augment_raw(dir / c["out"].get<std::string>(), augment_images().at(src));
    EXPECT_EQ(torch::randint(int64_t{1} << 31, {}, gen, torch::kInt64).item<int64_t>(), c["after"].get<int64_t>())
        << c.dump();
    ASSERT_EQ(sample.image.sizes(), expected.sizes()) << c.dump();
    EXPECT_TRUE(torch::equal(sample.image, expected)) << c.dump();
    changed += torch::equal(sample.image, image) ? 0 : 1;
    at::Generator again = at::make_generator<at::CPUGeneratorImpl>(c["seed"].get<uint64_t>());
    TransformedSample channels_last{image.permute({1, 2, 0}).contiguous().permute({2, 0, 1}), std::nullopt};
    jitter->apply(channels_last, again);
    EXPECT_TRUE(torch::equal(channels_last.image, expected)) << "channels last: " << c.dump();
  }
  EXPECT_GT(changed, static_cast<int64_t>(cases.size()) * 9 / 10);  // the images were jittered, not passed through
  EXPECT_EQ(color_jitter_transform().make(DataConfig{}), nullptr);  // all four at 0: no transform, nothing drawn
}

// v2.RandomErasing(p, value=0) from torch.manual_seed(seed): the same box (or none) and the generator left in the
// same state, at several p and sizes; and the box zeroed in a normalised batch row as F.erase does, in either layout.
TEST(RandomErasingBox, DrawsAndErasureEqualTorchvision) {
  if (!python_has_modules("torch, torchvision")) GTEST_SKIP() << python() << " does not have torchvision";
  TempDir dir;
  const nlohmann::json cases = augment_cases("erasing", dir);
  int64_t boxes = 0, draws = 0;
  for (const auto& c : cases) {
    if (c.contains("fixed")) {
      const torch::Tensor normalised = augment_raw(dir / "normalised.f32", {3, 11, 13}, torch::kFloat32);
      const torch::Tensor expected = augment_raw(dir / c["out"].get<std::string>(), {3, 11, 13}, torch::kFloat32);
      const CropBox box{c["fixed"][0], c["fixed"][1], c["fixed"][2], c["fixed"][3]};
      for (const auto format : {torch::MemoryFormat::Contiguous, torch::MemoryFormat::ChannelsLast}) {
        torch::Tensor batch = torch::empty({2, 3, 11, 13}, torch::TensorOptions().memory_format(format));
        batch[0].copy_(normalised);
        batch[1].copy_(normalised);
        erase_row(batch, 1, box);
        erase_row(batch, 0, std::nullopt);
        EXPECT_TRUE(torch::equal(batch[1], expected)) << c.dump();
        EXPECT_TRUE(torch::equal(batch[0], normalised)) << c.dump();
        torch::Tensor on_device = torch::stack({normalised, normalised}).contiguous(format);
        erase_rows(on_device, {RowErasure{1, box}});
        EXPECT_TRUE(torch::equal(on_device, batch)) << c.dump();
      }
      continue;
    }
    ++draws;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(c["seed"].get<uint64_t>());
    const std::optional<CropBox> box = RandomErasing(c["p"].get<double>()).draw(c["h"], c["w"], gen);
    EXPECT_EQ(torch::randint(int64_t{1} << 31, {}, gen, torch::kInt64).item<int64_t>(), c["after"].get<int64_t>())
        << c.dump();
    ASSERT_EQ(box.has_value(), !c["box"].is_null()) << c.dump();
    if (!box) continue;
    ++boxes;
    EXPECT_EQ(*box, (CropBox{c["box"][0], c["box"][1], c["box"][2], c["box"][3]})) << c.dump();
  }
  EXPECT_EQ(draws, 3 * 4 * 60);
  EXPECT_GT(boxes, draws / 3);  // the boxes drawn, not only the images kept whole
}

}  // namespace
}  // namespace ddp::test
