// Rounding-error bounds for tests that compare two floating-point computations of the same sums.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <limits>

namespace ddp::test {

// gamma_n = n u / (1 - n u), u the unit roundoff of `type` (2^-24 for float32). A sum or dot product of n terms,
// computed in any order and any blocking, with or without fused multiply-adds, lies within gamma_n * sum |terms| of
// its exact value (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed. 2002, Lemma 3.1 and (3.5)); two
// computations of the same sum in different orders (AVX-512, AVX2 or plain kernels, other blocking, split over ranks)
// therefore lie within 2 gamma_n sum |terms| of each other, on any machine.
inline double summation_gamma(int64_t n, torch::ScalarType type = torch::kFloat) {
  const double u = (type == torch::kDouble ? std::numeric_limits<double>::epsilon()
                                           : static_cast<double>(std::numeric_limits<float>::epsilon())) /
                   2;
  return static_cast<double>(n) * u / (1 - static_cast<double>(n) * u);
}

// The largest |a - b| / (2 gamma_n abs_terms) over the elements, where abs_terms holds each element's sum |terms|
// (the same computation run on the terms' absolute values). At most 1 when a and b compute the same sums of at most
// n terms, whatever the kernels; a wrong term shows as a share far above 1. An element whose terms are all zero must
// be zero on both sides (share 0 when equal, infinity when not).
inline double rounding_share(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& abs_terms,
                             int64_t n) {
  const torch::Tensor diff = (a.detach().to(torch::kDouble) - b.detach().to(torch::kDouble)).abs();
  const torch::Tensor bound = abs_terms.detach().to(torch::kDouble) * (2 * summation_gamma(n, a.scalar_type()));
  const torch::Tensor share = torch::where(diff == 0, torch::zeros_like(diff), diff / bound);
  return share.max().item<double>();
}

}  // namespace ddp::test
