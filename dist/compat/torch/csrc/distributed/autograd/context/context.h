// Fallback for the distributed-autograd context header that Debian's libtorch-dev omits but reducer.hpp includes.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

// Only the two names reducer.hpp uses are declared; ddptrain never uses distributed autograd.
class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
