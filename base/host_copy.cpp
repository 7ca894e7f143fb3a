// host_copy: a tensor's values copied into host memory.
#include "base/host_copy.h"

#include <ATen/ATen.h>

namespace ddp {

at::Tensor host_copy(const at::Tensor& t) {
  const at::Tensor values = t.detach();
  if (values.device().is_cpu()) return values.clone();
  at::Tensor host = at::empty_like(values, values.options().device(at::kCPU).pinned_memory(true));
  host.copy_(values, /*non_blocking=*/false);
  return host;
}

}  // namespace ddp
