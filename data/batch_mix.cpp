// BatchMix: torchvision.transforms.v2 MixUp, CutMix and RandomChoice (_augment.py, _container.py) in ATen.
#include "data/batch_mix.h"

#include "data/sample_key.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ddp {
namespace {

// Beta(alpha, alpha).sample() as torch.distributions.Beta draws it: Dirichlet([alpha, alpha]) through
// torch._sample_dirichlet on float32, its first component, read as a Python float.
double beta_sample(double alpha, at::Generator& gen) {
  const at::Tensor concentration = at::full({1, 2}, alpha, at::kFloat);
  return at::_sample_dirichlet(concentration, gen)[0][0].item<float>();
}

// torch.randint(high, size=(1,)) as a number.
int64_t randint(int64_t high, at::Generator& gen) { return at::randint(high, {1}, gen, at::kLong).item<int64_t>(); }

}  // namespace

torch::Tensor mixup_images(const torch::Tensor& images, double lam) {
  return images.roll(1, 0).mul_(1.0 - lam).add_(images.mul(lam));
}

torch::Tensor cutmix_images(const torch::Tensor& images, const MixBox& box) {
  const torch::Tensor rolled = images.roll(1, 0);
  torch::Tensor output = images.clone();
  using torch::indexing::Ellipsis;
  using torch::indexing::Slice;
  output.index_put_({Ellipsis, Slice(box.y1, box.y2), Slice(box.x1, box.x2)},
                    rolled.index({Ellipsis, Slice(box.y1, box.y2), Slice(box.x1, box.x2)}));
  return output;
}

torch::Tensor mix_labels(const torch::Tensor& labels, int64_t num_classes, double lam) {
  const torch::Tensor label = at::one_hot(labels, num_classes).to(torch::kFloat32);
  return label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam));
}

MixDraw cutmix_params(double lam, int64_t r_x, int64_t r_y, int64_t height, int64_t width) {
  const double r = 0.5 * std::sqrt(1.0 - lam);
  const auto r_w_half = static_cast<int64_t>(r * static_cast<double>(width));  // Python's int(): toward zero
  const auto r_h_half = static_cast<int64_t>(r * static_cast<double>(height));
  MixDraw d;
  d.kind = MixDraw::Kind::CutMix;
  d.box.x1 = std::max<int64_t>(r_x - r_w_half, 0);
  d.box.y1 = std::max<int64_t>(r_y - r_h_half, 0);
  d.box.x2 = std::min<int64_t>(r_x + r_w_half, width);
  d.box.y2 = std::min<int64_t>(r_y + r_h_half, height);
  // Python: float(1.0 - (x2 - x1) * (y2 - y1) / (W * H)), the quotient of two integers in double.
  d.lam =
      1.0 - static_cast<double>((d.box.x2 - d.box.x1) * (d.box.y2 - d.box.y1)) / static_cast<double>(width * height);
  return d;
}

MixDraw draw_mix(double mixup_alpha, double cutmix_alpha, int64_t height, int64_t width, at::Generator& gen) {
  std::vector<MixDraw::Kind> choices;
  if (mixup_alpha > 0) choices.push_back(MixDraw::Kind::MixUp);
  if (cutmix_alpha > 0) choices.push_back(MixDraw::Kind::CutMix);
  if (choices.empty()) return {};
  // RandomChoice: p = [1 / n] * n, idx = int(torch.multinomial(torch.tensor(p), 1)).
  const auto n = static_cast<int64_t>(choices.size());
  const at::Tensor p = at::full({n}, 1.0 / static_cast<double>(n), at::kFloat);
  const int64_t idx = at::multinomial(p, 1, /*replacement=*/false, gen).item<int64_t>();
  if (choices[static_cast<size_t>(idx)] == MixDraw::Kind::MixUp) {
    MixDraw d;
    d.kind = MixDraw::Kind::MixUp;
    d.lam = beta_sample(mixup_alpha, gen);
    return d;
  }
  const double lam = beta_sample(cutmix_alpha, gen);
  const int64_t r_x = randint(width, gen);
  const int64_t r_y = randint(height, gen);
  return cutmix_params(lam, r_x, r_y, height, width);
}

uint64_t mix_key(uint64_t seed, int64_t epoch, int64_t step, int64_t rank, int64_t micro_batch) {
  return sample_key(sample_key(seed, epoch, step), rank, micro_batch);
}

BatchMix::BatchMix(double mixup_alpha, double cutmix_alpha, int64_t num_classes)
    : mixup_alpha_(mixup_alpha), cutmix_alpha_(cutmix_alpha), num_classes_(num_classes) {}

MixedBatch BatchMix::apply(const torch::Tensor& images, const torch::Tensor& labels, uint64_t key) const {
  if (!enabled()) return {images, {}};
  at::Generator gen = at::detail::createCPUGenerator(key);
  return apply(images, labels, draw_mix(mixup_alpha_, cutmix_alpha_, images.size(-2), images.size(-1), gen));
}

MixedBatch BatchMix::apply(const torch::Tensor& images, const torch::Tensor& labels, const MixDraw& draw) const {
  switch (draw.kind) {
    case MixDraw::Kind::MixUp:
      return {mixup_images(images, draw.lam).contiguous(images.suggest_memory_format()),
              mix_labels(labels, num_classes_, draw.lam)};
    case MixDraw::Kind::CutMix:
      return {cutmix_images(images, draw.box), mix_labels(labels, num_classes_, draw.lam)};
    case MixDraw::Kind::None:
      break;
  }
  return {images, {}};
}

}  // namespace ddp
