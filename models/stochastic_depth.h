// stochastic_depth: torchvision.ops.stochastic_depth, the residual-branch drop of "Deep Networks with Stochastic Depth"
// (Huang et al., 2016), as torchvision's EfficientNet, ConvNeXt and others apply it.
#pragma once

#include <torch/types.h>

namespace ddp {

// Which entries share one draw: the whole batch ("batch") or each sample ("row"), torchvision's `mode`.
enum class StochasticDepthMode { Batch, Row };

// torchvision.ops.stochastic_depth(input, p, mode, training): outside training or at p = 0 the input itself; else
// input times a Bernoulli(1 - p) mask of shape [N, 1, ...] (row) or [1, ...] (batch) drawn with bernoulli_ from the
// input device's default generator, divided by 1 - p when that is above 0: the same draws as torchvision's.
torch::Tensor stochastic_depth(const torch::Tensor& input, double p, StochasticDepthMode mode, bool training);

}  // namespace ddp
