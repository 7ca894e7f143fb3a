// The automatic augmentation policies of torchvision/transforms/v2/_auto_augment.py: their augmentation spaces,
// their forwards' draws and their ops; the policy's row.
#include "data/auto_augment.h"

#include "config/config.h"
#include "data/sample_transforms.h"

#include <torch/torch.h>

#include <stdexcept>

namespace ddp {
namespace {

// How an op's magnitudes follow from the number of bins and the image's size (the _AUGMENTATION_SPACE lambdas).
enum class AugMagnitudeRule {
  None,       // no magnitudes
  Linspace,   // torch.linspace(a, b, bins)
  WidthMul,   // torch.linspace(0.0, b * width, bins)
  HeightMul,  // torch.linspace(0.0, b * height, bins)
  WidthDiv,   // torch.linspace(0.0, width / b, bins)
  HeightDiv,  // torch.linspace(0.0, height / b, bins)
  Posterize,  // (a - (torch.arange(bins) / ((bins - 1) / b))).round().int()
};

struct AugSpaceEntry {
  AugOp op;
  AugMagnitudeRule rule;
  double a, b;
  bool signed_magnitude;
};

using AugRule = AugMagnitudeRule;

// TrivialAugmentWide._AUGMENTATION_SPACE.
const std::vector<AugSpaceEntry> kTrivialAugmentWideSpace = {
    {AugOp::Identity, AugRule::None, 0, 0, false},           {AugOp::ShearX, AugRule::Linspace, 0.0, 0.99, true},
    {AugOp::ShearY, AugRule::Linspace, 0.0, 0.99, true},     {AugOp::TranslateX, AugRule::Linspace, 0.0, 32.0, true},
    {AugOp::TranslateY, AugRule::Linspace, 0.0, 32.0, true}, {AugOp::Rotate, AugRule::Linspace, 0.0, 135.0, true},
    {AugOp::Brightness, AugRule::Linspace, 0.0, 0.99, true}, {AugOp::Color, AugRule::Linspace, 0.0, 0.99, true},
    {AugOp::Contrast, AugRule::Linspace, 0.0, 0.99, true},   {AugOp::Sharpness, AugRule::Linspace, 0.0, 0.99, true},
    {AugOp::Posterize, AugRule::Posterize, 8, 6, false},     {AugOp::Solarize, AugRule::Linspace, 1.0, 0.0, false},
    {AugOp::AutoContrast, AugRule::None, 0, 0, false},       {AugOp::Equalize, AugRule::None, 0, 0, false},
};

// RandAugment._AUGMENTATION_SPACE.
const std::vector<AugSpaceEntry> kRandAugmentSpace = {
    {AugOp::Identity, AugRule::None, 0, 0, false},
    {AugOp::ShearX, AugRule::Linspace, 0.0, 0.3, true},
    {AugOp::ShearY, AugRule::Linspace, 0.0, 0.3, true},
    {AugOp::TranslateX, AugRule::WidthMul, 0.0, 150.0 / 331.0, true},
    {AugOp::TranslateY, AugRule::HeightMul, 0.0, 150.0 / 331.0, true},
    {AugOp::Rotate, AugRule::Linspace, 0.0, 30.0, true},
    {AugOp::Brightness, AugRule::Linspace, 0.0, 0.9, true},
    {AugOp::Color, AugRule::Linspace, 0.0, 0.9, true},
    {AugOp::Contrast, AugRule::Linspace, 0.0, 0.9, true},
    {AugOp::Sharpness, AugRule::Linspace, 0.0, 0.9, true},
    {AugOp::Posterize, AugRule::Posterize, 8, 4, false},
    {AugOp::Solarize, AugRule::Linspace, 1.0, 0.0, false},
    {AugOp::AutoContrast, AugRule::None, 0, 0, false},
    {AugOp::Equalize, AugRule::None, 0, 0, false},
};

// AutoAugment._AUGMENTATION_SPACE (looked up by the sub-policies' op names): RandAugment's without Identity, with
// Invert.
const std::vector<AugSpaceEntry> kAutoAugmentSpace = [] {
  std::vector<AugSpaceEntry> space(kRandAugmentSpace.begin() + 1, kRandAugmentSpace.end());
  space.push_back({AugOp::Invert, AugRule::None, 0, 0, false});
  return space;
}();

// AugMix._AUGMENTATION_SPACE (all_ops=True): _PARTIAL_AUGMENTATION_SPACE, then the colour ops.
const std::vector<AugSpaceEntry> kAugMixSpace = {
    {AugOp::ShearX, AugRule::Linspace, 0.0, 0.3, true},     {AugOp::ShearY, AugRule::Linspace, 0.0, 0.3, true},
    {AugOp::TranslateX, AugRule::WidthDiv, 0.0, 3.0, true}, {AugOp::TranslateY, AugRule::HeightDiv, 0.0, 3.0, true},
    {AugOp::Rotate, AugRule::Linspace, 0.0, 30.0, true},    {AugOp::Posterize, AugRule::Posterize, 4, 4, false},
    {AugOp::Solarize, AugRule::Linspace, 1.0, 0.0, false},  {AugOp::AutoContrast, AugRule::None, 0, 0, false},
    {AugOp::Equalize, AugRule::None, 0, 0, false},          {AugOp::Brightness, AugRule::Linspace, 0.0, 0.9, true},
    {AugOp::Color, AugRule::Linspace, 0.0, 0.9, true},      {AugOp::Contrast, AugRule::Linspace, 0.0, 0.9, true},
    {AugOp::Sharpness, AugRule::Linspace, 0.0, 0.9, true},
};

// AutoAugment._get_policies(AutoAugmentPolicy.IMAGENET): pairs of (op, probability, magnitude bin or -1).
struct AugPolicyStep {
  AugOp op;
  double probability;
  int64_t bin;
};
const std::vector<std::array<AugPolicyStep, 2>> kImageNetPolicy = {
    {{{AugOp::Posterize, 0.4, 8}, {AugOp::Rotate, 0.6, 9}}},
    {{{AugOp::Solarize, 0.6, 5}, {AugOp::AutoContrast, 0.6, -1}}},
    {{{AugOp::Equalize, 0.8, -1}, {AugOp::Equalize, 0.6, -1}}},
    {{{AugOp::Posterize, 0.6, 7}, {AugOp::Posterize, 0.6, 6}}},
    {{{AugOp::Equalize, 0.4, -1}, {AugOp::Solarize, 0.2, 4}}},
    {{{AugOp::Equalize, 0.4, -1}, {AugOp::Rotate, 0.8, 8}}},
    {{{AugOp::Solarize, 0.6, 3}, {AugOp::Equalize, 0.6, -1}}},
    {{{AugOp::Posterize, 0.8, 5}, {AugOp::Equalize, 1.0, -1}}},
    {{{AugOp::Rotate, 0.2, 3}, {AugOp::Solarize, 0.6, 8}}},
    {{{AugOp::Equalize, 0.6, -1}, {AugOp::Posterize, 0.4, 6}}},
    {{{AugOp::Rotate, 0.8, 8}, {AugOp::Color, 0.4, 0}}},
    {{{AugOp::Rotate, 0.4, 9}, {AugOp::Equalize, 0.6, -1}}},
    {{{AugOp::Equalize, 0.0, -1}, {AugOp::Equalize, 0.8, -1}}},
    {{{AugOp::Invert, 0.6, -1}, {AugOp::Equalize, 1.0, -1}}},
    {{{AugOp::Color, 0.6, 4}, {AugOp::Contrast, 1.0, 8}}},
    {{{AugOp::Rotate, 0.8, 8}, {AugOp::Color, 1.0, 2}}},
    {{{AugOp::Color, 0.8, 8}, {AugOp::Solarize, 0.8, 7}}},
    {{{AugOp::Sharpness, 0.4, 7}, {AugOp::Invert, 0.6, -1}}},
    {{{AugOp::ShearX, 0.6, 5}, {AugOp::Equalize, 1.0, -1}}},
    {{{AugOp::Color, 0.4, 0}, {AugOp::Equalize, 0.6, -1}}},
    {{{AugOp::Equalize, 0.4, -1}, {AugOp::Solarize, 0.2, 4}}},
    {{{AugOp::Solarize, 0.6, 5}, {AugOp::AutoContrast, 0.6, -1}}},
    {{{AugOp::Invert, 0.6, -1}, {AugOp::Equalize, 1.0, -1}}},
    {{{AugOp::Color, 0.6, 4}, {AugOp::Contrast, 1.0, 8}}},
    {{{AugOp::Equalize, 0.8, -1}, {AugOp::Equalize, 0.6, -1}}},
};

constexpr int64_t kAugMixWidth = 3;          // AugMix(mixture_width=3)
constexpr int64_t kAugAugMixBins = 10;       // AugMix._PARAMETER_MAX
constexpr int64_t kAugAutoAugmentBins = 10;  // AutoAugment.forward's magnitudes_fn(10, ...)
constexpr int64_t kAugWideBins = 31;         // num_magnitude_bins=31

const std::vector<AugSpaceEntry>& aug_policy_space(AutoAugmentChoice policy) {
  static const std::vector<AugSpaceEntry> none;
  switch (policy) {
    case AutoAugmentChoice::TaWide:
      return kTrivialAugmentWideSpace;
    case AutoAugmentChoice::RandAugment:
      return kRandAugmentSpace;
    case AutoAugmentChoice::ImageNet:
      return kAutoAugmentSpace;
    case AutoAugmentChoice::AugMix:
      return kAugMixSpace;
    case AutoAugmentChoice::None:
      break;
  }
  return none;
}

const AugSpaceEntry& aug_space_entry(AutoAugmentChoice policy, AugOp op) {
  for (const AugSpaceEntry& e : aug_policy_space(policy))
    if (e.op == op) return e;
  throw std::invalid_argument("auto augment: no op " + std::string(aug_op_name(op)) + " in the policy");
}

// int(torch.randint(n, ())), torch.rand(()) from `gen`.
int64_t aug_draw_index(int64_t n, at::Generator& gen) {
  return torch::randint(n, {}, gen, torch::TensorOptions().dtype(torch::kInt64)).item<int64_t>();
}
float aug_draw_uniform(at::Generator& gen) {
  return torch::rand({}, gen, torch::TensorOptions().dtype(torch::kFloat32)).item<float>();
}

}  // namespace

AutoAugmentPolicy::AutoAugmentPolicy(AutoAugmentOptions options) : options_(options) {
  if (options_.ra_magnitude < 0 || options_.ra_magnitude >= kAugWideBins)
    throw std::invalid_argument("RandAugment: magnitude in 0..30");
  if (options_.augmix_severity < 1 || options_.augmix_severity > kAugAugMixBins)
    throw std::invalid_argument("AugMix: severity in 1..10");
}

const std::vector<AugOp>& AutoAugmentPolicy::ops() const {
  static const auto list = [](AutoAugmentChoice p) {
    std::vector<AugOp> ops;
    for (const AugSpaceEntry& e : aug_policy_space(p)) ops.push_back(e.op);
    return ops;
  };
  static const std::vector<AugOp> none, ta = list(AutoAugmentChoice::TaWide), ra = list(AutoAugmentChoice::RandAugment),
                                        aa = list(AutoAugmentChoice::ImageNet), am = list(AutoAugmentChoice::AugMix);
  switch (options_.policy) {
    case AutoAugmentChoice::TaWide:
      return ta;
    case AutoAugmentChoice::RandAugment:
      return ra;
    case AutoAugmentChoice::ImageNet:
      return aa;
    case AutoAugmentChoice::AugMix:
      return am;
    case AutoAugmentChoice::None:
      break;
  }
  return none;
}

int64_t AutoAugmentPolicy::magnitude_bins() const {
  switch (options_.policy) {
    case AutoAugmentChoice::ImageNet:
      return kAugAutoAugmentBins;
    case AutoAugmentChoice::AugMix:
      return kAugAugMixBins;
    default:
      return kAugWideBins;
  }
}

bool AutoAugmentPolicy::has_magnitudes(AugOp op) const {
  return aug_space_entry(options_.policy, op).rule != AugMagnitudeRule::None;
}

bool AutoAugmentPolicy::signed_op(AugOp op) const { return aug_space_entry(options_.policy, op).signed_magnitude; }

std::vector<double> AutoAugmentPolicy::magnitudes(AugOp op, int64_t height, int64_t width) const {
  const AugSpaceEntry& e = aug_space_entry(options_.policy, op);
  const int64_t bins = magnitude_bins();
  const auto w = static_cast<double>(width), h = static_cast<double>(height);
  torch::Tensor m;
  switch (e.rule) {
    case AugMagnitudeRule::None:
      return {};
    case AugMagnitudeRule::Linspace:
      m = torch::linspace(e.a, e.b, bins, torch::kFloat32);
      break;
    case AugMagnitudeRule::WidthMul:
      m = torch::linspace(0.0, e.b * w, bins, torch::kFloat32);
      break;
    case AugMagnitudeRule::HeightMul:
      m = torch::linspace(0.0, e.b * h, bins, torch::kFloat32);
      break;
    case AugMagnitudeRule::WidthDiv:
      m = torch::linspace(0.0, w / e.b, bins, torch::kFloat32);
      break;
    case AugMagnitudeRule::HeightDiv:
      m = torch::linspace(0.0, h / e.b, bins, torch::kFloat32);
      break;
    case AugMagnitudeRule::Posterize:
      m = torch::rsub(torch::arange(bins) / (static_cast<double>(bins - 1) / e.b), e.a).round().to(torch::kInt32);
      break;
  }
  m = m.to(torch::kFloat64);
  return std::vector<double>(m.data_ptr<double>(), m.data_ptr<double>() + m.numel());
}

OpDraw AutoAugmentPolicy::draw_op(AugOp op, int64_t bin, int64_t bins_to_draw, int64_t height, int64_t width,
                                  at::Generator& gen) const {
  OpDraw d;
  d.op = op;
  const std::vector<double> magnitudes = this->magnitudes(op, height, width);
  if (magnitudes.empty()) return d;
  d.bin = bins_to_draw > 0 ? aug_draw_index(bins_to_draw, gen) : bin;
  d.magnitude = magnitudes.at(static_cast<size_t>(d.bin));
  // `if signed and torch.rand(()) <= 0.5: magnitude *= -1`
  if (signed_op(op) && aug_draw_uniform(gen) <= 0.5f) {
    d.negated = true;
    d.magnitude *= -1;
  }
  return d;
}

PolicyDraw AutoAugmentPolicy::draw(int64_t height, int64_t width, at::Generator& gen) const {
  PolicyDraw d;
  const std::vector<AugOp>& ops = this->ops();
  const auto n_ops = static_cast<int64_t>(ops.size());
  switch (options_.policy) {
    case AutoAugmentChoice::None:
      break;
    case AutoAugmentChoice::TaWide: {  // TrivialAugmentWide.forward: an op, a bin, a sign
      const AugOp op = ops[static_cast<size_t>(aug_draw_index(n_ops, gen))];
      d.chains = {{draw_op(op, -1, kAugWideBins, height, width, gen)}};
      break;
    }
    case AutoAugmentChoice::RandAugment: {  // RandAugment.forward: num_ops times an op and a sign, the bin fixed
      d.chains.emplace_back();
      for (int64_t i = 0; i < options_.ra_num_ops; ++i) {
        const AugOp op = ops[static_cast<size_t>(aug_draw_index(n_ops, gen))];
        d.chains[0].push_back(draw_op(op, options_.ra_magnitude, 0, height, width, gen));
      }
      break;
    }
    case AutoAugmentChoice::ImageNet: {  // AutoAugment.forward: a sub-policy, then each step's probability and sign
      d.sub_policy = aug_draw_index(static_cast<int64_t>(kImageNetPolicy.size()), gen);
      d.chains.emplace_back();
      for (const AugPolicyStep& step : kImageNetPolicy[static_cast<size_t>(d.sub_policy)]) {
        // `if not torch.rand(()) <= probability: continue`, compared in float32
        if (!(aug_draw_uniform(gen) <= static_cast<float>(step.probability))) continue;
        d.chains[0].push_back(draw_op(step.op, step.bin, 0, height, width, gen));
      }
      break;
    }
    case AutoAugmentChoice::AugMix: {  // AugMix.forward: the Beta and Dirichlet weights, then each chain
      const auto alpha = torch::TensorOptions().dtype(torch::kFloat32);
      d.mix = at::_sample_dirichlet(torch::full({2}, 1.0, alpha).expand({1, -1}), gen);
      d.chain_weights = at::_sample_dirichlet(torch::full({kAugMixWidth}, 1.0, alpha).expand({1, -1}), gen) *
                        d.mix.select(1, 1).reshape({1, -1});
      for (int64_t i = 0; i < kAugMixWidth; ++i) {
        const int64_t depth =
            torch::randint(1, 4, {1}, gen, torch::TensorOptions().dtype(torch::kInt64)).item<int64_t>();
        d.chains.emplace_back();
        for (int64_t k = 0; k < depth; ++k) {
          const AugOp op = ops[static_cast<size_t>(aug_draw_index(n_ops, gen))];
          d.chains.back().push_back(draw_op(op, -1, options_.augmix_severity, height, width, gen));
        }
      }
      break;
    }
  }
  return d;
}

torch::Tensor AutoAugmentPolicy::apply(const torch::Tensor& image, const PolicyDraw& draw) const {
  const bool augmix = options_.policy == AutoAugmentChoice::AugMix;
  const GridInterpolation mode = options_.interpolation == PolicyInterpolation::Bilinear ||
                                         (options_.interpolation == PolicyInterpolation::Auto && augmix)
                                     ? GridInterpolation::Bilinear
                                     : GridInterpolation::Nearest;
  if (!augmix) {
    torch::Tensor out = image;
    for (const auto& chain : draw.chains)
      for (const OpDraw& op : chain) out = apply_aug_op(out, op.op, op.magnitude, mode);
    return out;
  }
  // AugMix: the image as a batch of one, m[0] of it plus each chain's weight of the chain's result, truncated to uint8.
  const std::vector<int64_t> batch_dims = {1, 1, 1, 1};
  const torch::Tensor batch = image.reshape({1, image.size(-3), image.size(-2), image.size(-1)});
  torch::Tensor mix = draw.mix.select(1, 0).reshape(batch_dims) * batch;
  for (size_t i = 0; i < draw.chains.size(); ++i) {
    torch::Tensor aug = batch;
    for (const OpDraw& op : draw.chains[i]) aug = apply_aug_op(aug, op.op, op.magnitude, mode);
    mix.add_(draw.chain_weights.select(1, static_cast<int64_t>(i)).reshape(batch_dims) * aug);
  }
  return mix.reshape(image.sizes()).to(torch::kUInt8);
}

torch::Tensor AutoAugmentPolicy::operator()(const torch::Tensor& image, at::Generator& gen) const {
  if (!active()) return image;
  return apply(image, draw(image.size(-2), image.size(-1), gen));
}

namespace {

// data.auto_augment's policy after the flip, on the loader threads (no device applies it).
class PolicyTransform : public PixelTransform {
 public:
  explicit PolicyTransform(const DataConfig& data)
      : options_{data.auto_augment, data.ra_magnitude, data.ra_num_ops, data.augmix_severity,
                 data.auto_augment_interpolation},
        policy_(options_) {}
  std::string describe() const override {
    const std::string mode = options_.interpolation == PolicyInterpolation::Nearest    ? "interpolation=nearest"
                             : options_.interpolation == PolicyInterpolation::Bilinear ? "interpolation=bilinear"
                                                                                       : "";
    const auto args = [&](std::string own) {
      if (!own.empty() && !mode.empty()) own += ", ";
      return "(" + own + mode + ")";
    };
    switch (options_.policy) {
      case AutoAugmentChoice::TaWide:
        return "TrivialAugmentWide" + args("");
      case AutoAugmentChoice::RandAugment:
        return "RandAugment" + args("num_ops=" + std::to_string(options_.ra_num_ops) +
                                    ", magnitude=" + std::to_string(options_.ra_magnitude));
      case AutoAugmentChoice::ImageNet:
        return "AutoAugment" + args("policy=AutoAugmentPolicy.IMAGENET");
      case AutoAugmentChoice::AugMix:
        return "AugMix" + args("severity=" + std::to_string(options_.augmix_severity));
      case AutoAugmentChoice::None:
        break;
    }
    return "Identity()";
  }
  void apply(TransformedSample& sample, at::Generator& gen) const override {
    sample.image = policy_(sample.image, gen);
  }

 private:
  AutoAugmentOptions options_;
  AutoAugmentPolicy policy_;
};

}  // namespace

const PixelTransformRow& auto_augment_transform() {
  static const PixelTransformRow row{"auto_augment",
                                     [](const DataConfig& data) -> std::unique_ptr<const PixelTransform> {
                                       if (data.auto_augment == AutoAugmentChoice::None) return nullptr;
                                       return std::make_unique<PolicyTransform>(data);
                                     }};
  return row;
}

}  // namespace ddp
