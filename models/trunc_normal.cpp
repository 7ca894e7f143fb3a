// torch.nn.init.trunc_normal_ in ATen operations.
#include "models/trunc_normal.h"

#include <torch/utils.h>

#include <cmath>

namespace ddp {

void trunc_normal_(torch::Tensor t, double mean, double std, double a, double b) {
  torch::NoGradGuard no_grad;
  const auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
  t.uniform_(2 * l - 1, 2 * u - 1);
  t.erfinv_();
  t.mul_(std * std::sqrt(2.0));
  t.add_(mean);
  t.clamp_(a, b);
}

}  // namespace ddp
