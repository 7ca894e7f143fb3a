// python_number: a Python number as ATen receives it where an operator takes a tensor (t.mul_(0.9), t.add_(1)).
#pragma once

#include <ATen/ScalarOps.h>

namespace ddp {

// A wrapped 0-dim CPU tensor, what Python's argument parser makes of a number for an operator's Tensor overload:
// the operator then runs once (mul_.Tensor), where the Scalar overload LibTorch's C++ picks (mul_.Scalar) runs and
// dispatches a second operator inside it. Type promotion treats it as a scalar: the result keeps the tensor's dtype.
inline at::Tensor python_number(const c10::Scalar& value) { return at::native::wrapped_scalar_tensor(value); }

}  // namespace ddp
