// trunc_normal_: torch.nn.init.trunc_normal_, the initialisation torchvision's ConvNeXt and ViT draw from.
#pragma once

#include <torch/types.h>

namespace ddp {

// torch.nn.init.trunc_normal_(t, mean, std, a, b): uniform_ over [2 cdf(a) - 1, 2 cdf(b) - 1] of the standard normal's
// cdf at (a - mean) / std and (b - mean) / std, erfinv_, times std * sqrt(2), plus mean, clamped to [a, b] (a and b
// are bounds on the values, not multiples of std); the same draws from the global CPU generator as PyTorch's.
void trunc_normal_(torch::Tensor t, double mean, double std, double a = -2.0, double b = 2.0);

}  // namespace ddp
