// Bf16CompressHook: bf16_compress_hook's cast, division, all-reduce and copy back, on c10d's ProcessGroup.
#include "distributed/compress_hook.h"

#include <vector>

namespace ddp {

std::optional<at::ScalarType> compressed_dtype(GradCompression compression) {
  switch (compression) {
    case GradCompression::Fp16:
      return at::kHalf;
    case GradCompression::Bf16:
      return at::kBFloat16;
    case GradCompression::None:
    case GradCompression::PowerSgd:  // sends low-rank factors in the gradients' own dtype
      break;
  }
  return std::nullopt;
}

c10::intrusive_ptr<c10::ivalue::Future> Bf16CompressHook::runHook(c10d::GradBucket& bucket) {
  at::Tensor buffer = bucket.getBufferRef();
  // _compress_hook: buffer.to(dtype).div_(world_size), the division first so that the sum cannot overflow.
  std::vector<at::Tensor> compressed{buffer.to(at::kBFloat16).div_(state_->getSize())};
  auto all_reduced = state_->allreduce(compressed)->getFuture();
  // decompress: the sums copied back into the bucket in place, as the hook does to keep the peak memory down.
  return all_reduced->then(
      [buffer](c10::ivalue::Future& done) {
        buffer.copy_(done.value().toTensorVector().at(0));
        return c10::IValue(buffer);
      },
      c10::TensorType::get());
}

}  // namespace ddp
