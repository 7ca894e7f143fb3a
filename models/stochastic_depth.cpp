// torchvision.ops.stochastic_depth in ATen operations.
#include "models/stochastic_depth.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <vector>

namespace ddp {

torch::Tensor stochastic_depth(const torch::Tensor& input, double p, StochasticDepthMode mode, bool training) {
  if (p < 0.0 || p > 1.0)
    throw std::invalid_argument("stochastic_depth: drop probability has to be between 0 and 1, got " +
                                std::to_string(p));
  if (!training || p == 0.0) return input;
  const double survival_rate = 1.0 - p;
  std::vector<int64_t> size(static_cast<size_t>(input.dim()), 1);
  if (mode == StochasticDepthMode::Row) size[0] = input.size(0);
  at::Tensor noise = at::empty(size, input.options()).bernoulli_(survival_rate);
  if (survival_rate > 0.0) noise.div_(survival_rate);
  return input * noise;
}

}  // namespace ddp
