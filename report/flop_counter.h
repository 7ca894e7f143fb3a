// FlopCounter: the floating-point operations of matrix products and convolutions, counted as PyTorch counts them.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace ddp {

// While one lives, every thread's aten::mm, addmm, bmm, baddbmm, convolution, convolution_backward and the fused
// scaled-dot-product attention kernels FlopCounterMode registers (flash, efficient, cuDNN; forward and backward) are
// counted with torch.utils.flop_counter.FlopCounterMode's formulas (2 per multiply-add; a convolution's backward counts
// the gradients it computes, per its output_mask), through a global RecordFunction callback that costs nothing once it
// is gone. One at a time.
class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;
  int64_t flops() const;

 private:
  uint64_t handle_;
};

// The FLOPs FlopCounterMode counts for one call of the ATen operator `name` ("aten::mm") with these inputs; 0 for an
// operator it does not count.
int64_t operator_flops(const char* name, c10::ArrayRef<const c10::IValue> inputs);

}  // namespace ddp
