// host_copy: a tensor's values copied into host memory that nothing else holds, for a checkpoint to serialise off the
// training thread.
#pragma once

#include <ATen/core/Tensor.h>

namespace ddp {

// A copy of `t`'s values (detached, same strides) in host memory: for a CPU tensor, clone()'s copy in a buffer kept from
// the copies let go before when one of its size is free (the pages of the last checkpoint's copies, not fresh ones); a
// device tensor's values in pinned memory (the device's caching host allocator), complete on return. The device-to-host copy is a blocking
// one: ATen records an event on a pinned block that a non-blocking copy used, and the block's release (on whichever
// thread drops the copy, a checkpoint's background writer here) then records it on the device's stream, a CUDA call
// that a CUDA graph's capture on the training thread forbids.
at::Tensor host_copy(const at::Tensor& t);

}  // namespace ddp
