// Bf16CompressHook (PyTorch DDP's bf16_compress_hook) and the dtype each dist.grad_compression sends gradients in.
#pragma once

#include "config/choices.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <optional>

namespace ddp {

// The dtype gradient buckets travel in: float16 or bfloat16; none when they are all-reduced as they are.
std::optional<at::ScalarType> compressed_dtype(GradCompression compression);

// torch.distributed.algorithms.ddp_comm_hooks.default_hooks.bf16_compress_hook, as LibTorch's FP16CompressCommHook is
// fp16_compress_hook: each bucket cast to bfloat16, divided by the world size, all-reduced (sum) and copied back
// into the bucket.
class Bf16CompressHook final : public c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>> {
 public:
  explicit Bf16CompressHook(const c10::intrusive_ptr<c10d::ProcessGroup>& group)
      : c10d::CppCommHookInterface<c10::intrusive_ptr<c10d::ProcessGroup>>(group) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
};

}  // namespace ddp
