// Config choices: every closed set of names a key accepts, as an enum whose names are written here once (the names
// of optimizer.name, model.name and data.dataset are rows: config/row_choice.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

template <class E>
struct NamedChoice {
  E value;
  std::string_view name;
};

// ChoiceTable<E>::names: E's names in the order --help lists them. A value's first name is the one ddptrain prints;
// a later name for the same value is an alias accepted at load (amp.dtype's fp16, bf16).
template <class E>
struct ChoiceTable;

// training.on_nonfinite: what a step whose gradients are not finite does (when no loss scaler handles it).
enum class OnNonFinite { Stop, Skip };
template <>
struct ChoiceTable<OnNonFinite> {
  static constexpr NamedChoice<OnNonFinite> names[] = {{OnNonFinite::Stop, "stop"}, {OnNonFinite::Skip, "skip"}};
};

// data.on_bad_sample: what an image that cannot be decoded does.
enum class OnBadSample { Error, Skip };
template <>
struct ChoiceTable<OnBadSample> {
  static constexpr NamedChoice<OnBadSample> names[] = {{OnBadSample::Error, "error"}, {OnBadSample::Skip, "skip"}};
};

// data.decode: where an image folder's JPEGs are decoded and transformed (auto: the GPU on a CUDA device).
enum class DecodeChoice { Cpu, Gpu, Auto };
template <>
struct ChoiceTable<DecodeChoice> {
  static constexpr NamedChoice<DecodeChoice> names[] = {
      {DecodeChoice::Cpu, "cpu"}, {DecodeChoice::Gpu, "gpu"}, {DecodeChoice::Auto, "auto"}};
};

// data.augment: the training transform of an image folder.
enum class Augment { Standard, None };
template <>
struct ChoiceTable<Augment> {
  static constexpr NamedChoice<Augment> names[] = {{Augment::Standard, "standard"}, {Augment::None, "none"}};
};

// data.interpolation: the resize of an image folder's training crop and evaluation image (torchvision's
// InterpolationMode; antialiased, as v2.Resize and v2.RandomResizedCrop by default).
enum class Interpolation { Bilinear, Bicubic };
template <>
struct ChoiceTable<Interpolation> {
  static constexpr NamedChoice<Interpolation> names[] = {{Interpolation::Bilinear, "bilinear"},
                                                         {Interpolation::Bicubic, "bicubic"}};
};

// data.auto_augment: the automatic augmentation policy an image folder's training crops go through (torchvision's
// v2.TrivialAugmentWide, v2.RandAugment, v2.AutoAugment(AutoAugmentPolicy.IMAGENET), v2.AugMix).
enum class AutoAugmentChoice { None, TaWide, RandAugment, ImageNet, AugMix };
template <>
struct ChoiceTable<AutoAugmentChoice> {
  static constexpr NamedChoice<AutoAugmentChoice> names[] = {{AutoAugmentChoice::None, "none"},
                                                             {AutoAugmentChoice::TaWide, "ta_wide"},
                                                             {AutoAugmentChoice::RandAugment, "rand_augment"},
                                                             {AutoAugmentChoice::ImageNet, "imagenet"},
                                                             {AutoAugmentChoice::AugMix, "augmix"}};
};

// data.auto_augment_interpolation: how a policy's rotate, shear and translate ops sample the image: the policy
// class's default (auto: NEAREST; AugMix BILINEAR), or the mode given, as torchvision's reference presets pass
// --interpolation to the policy (its tensor kernels take nearest and bilinear).
enum class PolicyInterpolation { Auto, Nearest, Bilinear };
template <>
struct ChoiceTable<PolicyInterpolation> {
  static constexpr NamedChoice<PolicyInterpolation> names[] = {{PolicyInterpolation::Auto, "auto"},
                                                               {PolicyInterpolation::Nearest, "nearest"},
                                                               {PolicyInterpolation::Bilinear, "bilinear"}};
};

// model.memory_format
enum class MemoryFormat { Auto, Contiguous, ChannelsLast };
template <>
struct ChoiceTable<MemoryFormat> {
  static constexpr NamedChoice<MemoryFormat> names[] = {{MemoryFormat::Auto, "auto"},
                                                        {MemoryFormat::Contiguous, "contiguous"},
                                                        {MemoryFormat::ChannelsLast, "channels_last"}};
};

// optimizer.foreach: torch.optim's foreach argument (None, True, False): auto runs the multi-tensor kernels where
// torch.optim does by default (every parameter on CUDA), on the per-parameter loop elsewhere.
enum class Foreach { Auto, On, Off };
template <>
struct ChoiceTable<Foreach> {
  static constexpr NamedChoice<Foreach> names[] = {{Foreach::Auto, "auto"}, {Foreach::On, "on"}, {Foreach::Off, "off"}};
};

// optimizer.scale_lr
enum class LrScaling { None, Linear };
template <>
struct ChoiceTable<LrScaling> {
  static constexpr NamedChoice<LrScaling> names[] = {{LrScaling::None, "none"}, {LrScaling::Linear, "linear"}};
};

// lr_scheduler.warmup_method: torch.optim.lr_scheduler's LinearLR (a ramp) or ConstantLR (a step) before the decay.
enum class WarmupMethod { Linear, Constant };
template <>
struct ChoiceTable<WarmupMethod> {
  static constexpr NamedChoice<WarmupMethod> names[] = {{WarmupMethod::Linear, "linear"},
                                                        {WarmupMethod::Constant, "constant"}};
};

// lr_scheduler.decay
enum class LrDecay { None, Cosine, Step, MultiStep };
template <>
struct ChoiceTable<LrDecay> {
  static constexpr NamedChoice<LrDecay> names[] = {
      {LrDecay::None, "none"}, {LrDecay::Cosine, "cosine"}, {LrDecay::Step, "step"}, {LrDecay::MultiStep, "multistep"}};
};

// amp.dtype
enum class AmpDtype { Auto, Float16, BFloat16 };
template <>
struct ChoiceTable<AmpDtype> {
  static constexpr NamedChoice<AmpDtype> names[] = {{AmpDtype::Auto, "auto"},
                                                    {AmpDtype::Float16, "float16"},
                                                    {AmpDtype::BFloat16, "bfloat16"},
                                                    {AmpDtype::Float16, "fp16"},
                                                    {AmpDtype::BFloat16, "bf16"}};
};

// amp.loss_scaling
enum class LossScaling { Auto, Dynamic, Off };
template <>
struct ChoiceTable<LossScaling> {
  static constexpr NamedChoice<LossScaling> names[] = {
      {LossScaling::Auto, "auto"}, {LossScaling::Dynamic, "dynamic"}, {LossScaling::Off, "off"}};
};

// dist.device
enum class DeviceChoice { Auto, Cpu, Cuda };
template <>
struct ChoiceTable<DeviceChoice> {
  static constexpr NamedChoice<DeviceChoice> names[] = {
      {DeviceChoice::Auto, "auto"}, {DeviceChoice::Cpu, "cpu"}, {DeviceChoice::Cuda, "cuda"}};
};

// dist.backend
enum class BackendChoice { Auto, Gloo, Nccl };
template <>
struct ChoiceTable<BackendChoice> {
  static constexpr NamedChoice<BackendChoice> names[] = {
      {BackendChoice::Auto, "auto"}, {BackendChoice::Gloo, "gloo"}, {BackendChoice::Nccl, "nccl"}};
};

// dist.grad_compression
enum class GradCompression { None, Fp16, Bf16, PowerSgd };
template <>
struct ChoiceTable<GradCompression> {
  static constexpr NamedChoice<GradCompression> names[] = {{GradCompression::None, "none"},
                                                           {GradCompression::Fp16, "fp16"},
                                                           {GradCompression::Bf16, "bf16"},
                                                           {GradCompression::PowerSgd, "powersgd"}};
};

// dist.powersgd_products
enum class PowerSgdProducts { Hook, Transposed };
template <>
struct ChoiceTable<PowerSgdProducts> {
  static constexpr NamedChoice<PowerSgdProducts> names[] = {{PowerSgdProducts::Hook, "hook"},
                                                            {PowerSgdProducts::Transposed, "transposed"}};
};

// dist.allreduce
enum class AllreducePath { Auto, Shm, Hierarchical, Gloo };
template <>
struct ChoiceTable<AllreducePath> {
  static constexpr NamedChoice<AllreducePath> names[] = {{AllreducePath::Auto, "auto"},
                                                         {AllreducePath::Shm, "shm"},
                                                         {AllreducePath::Hierarchical, "hierarchical"},
                                                         {AllreducePath::Gloo, "gloo"}};
};

// checkpoint.on_error
enum class OnCheckpointError { Fail, Warn };
template <>
struct ChoiceTable<OnCheckpointError> {
  static constexpr NamedChoice<OnCheckpointError> names[] = {{OnCheckpointError::Fail, "fail"},
                                                             {OnCheckpointError::Warn, "warn"}};
};

// checkpoint.replicas
enum class CheckpointReplicas { Auto, Node, Rank0 };
template <>
struct ChoiceTable<CheckpointReplicas> {
  static constexpr NamedChoice<CheckpointReplicas> names[] = {
      {CheckpointReplicas::Auto, "auto"}, {CheckpointReplicas::Node, "node"}, {CheckpointReplicas::Rank0, "rank0"}};
};

// checkpoint.resume (any other value is a path: ResumeFrom)
enum class ResumeMode { Auto, Never, Path };
template <>
struct ChoiceTable<ResumeMode> {
  static constexpr NamedChoice<ResumeMode> names[] = {{ResumeMode::Auto, "auto"}, {ResumeMode::Never, "never"}};
};

// metrics.progress
enum class ProgressMode { Auto, Bar, Plain, Off };
template <>
struct ChoiceTable<ProgressMode> {
  static constexpr NamedChoice<ProgressMode> names[] = {{ProgressMode::Auto, "auto"},
                                                        {ProgressMode::Bar, "bar"},
                                                        {ProgressMode::Plain, "plain"},
                                                        {ProgressMode::Off, "off"}};
};

// The value `name` stands for, or nullopt when E has no such name.
template <class E>
std::optional<E> parse_choice(std::string_view name) {
  for (const auto& c : ChoiceTable<E>::names)
    if (c.name == name) return c.value;
  return std::nullopt;
}

// The name ddptrain prints for `value` (its first in the table).
template <class E>
std::string choice_name(E value) {
  for (const auto& c : ChoiceTable<E>::names)
    if (c.value == value) return std::string(c.name);
  return "?";
}

// Every name E accepts, aliases included, in table order.
template <class E>
std::vector<std::string> choice_names() {
  std::vector<std::string> out;
  for (const auto& c : ChoiceTable<E>::names) out.emplace_back(c.name);
  return out;
}

// Every value of E that has a name, once each, in table order.
template <class E>
std::vector<E> choice_values() {
  std::vector<E> out;
  for (const auto& c : ChoiceTable<E>::names) {
    bool seen = false;
    for (E v : out) seen = seen || v == c.value;
    if (!seen) out.push_back(c.value);
  }
  return out;
}

}  // namespace ddp
