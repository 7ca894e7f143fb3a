// FlopCounter: the floating-point operations of matrix products and convolutions, counted as PyTorch counts them.
#pragma once

#include <cstdint>

namespace ddp {

// While one lives, every thread's aten::mm, addmm, bmm, baddbmm, convolution and convolution_backward are counted
// with torch.utils.flop_counter.FlopCounterMode's formulas (2 per multiply-add; a convolution's backward counts the
// gradients it computes, per its output_mask), through a global RecordFunction callback that costs nothing once it
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

}  // namespace ddp
