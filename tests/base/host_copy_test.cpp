// host_copy of CPU tensors: clone()'s values, dtype and strides in memory of its own; a copy let go leaves its buffer
// to the next copy of that size, and copies alive at once never share one.
#include "base/host_copy.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(HostCopy, ACopyHasCloneLayoutAndReusesTheBufferALetGoCopyOfItsSizeLeft) {
  at::manual_seed(0);
  const at::Tensor weights = at::randn({64, 3, 7, 7}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor counts = at::arange(10, at::kLong);
  const at::Tensor strided = at::randn({6, 8}).t();  // dense, transposed strides
  const at::Tensor every_other = at::randn({12})     // not dense: clone()'s contiguous copy
                                     .slice(0, 0, 12, 2);
  for (const at::Tensor& t : {weights, counts, strided, every_other}) {
    const at::Tensor copy = host_copy(t);
    const at::Tensor clone = t.clone();
    EXPECT_TRUE(at::equal(copy, t));
    EXPECT_EQ(copy.scalar_type(), t.scalar_type());
    EXPECT_EQ(copy.strides(), clone.strides());
    EXPECT_EQ(copy.storage().nbytes(), clone.storage().nbytes());  // what torch.save writes
    EXPECT_NE(copy.data_ptr(), t.data_ptr());
    EXPECT_FALSE(copy.requires_grad());
  }
  // Let go, then asked for again (the next checkpoint): the same buffer, holding the new values.
  const void* first = nullptr;
  {
    const at::Tensor copy = host_copy(weights);
    first = copy.data_ptr();
  }
  at::Tensor changed = weights * 2;  // the size let go: malloc would hand it this freed block, the copies' keeper not
  const at::Tensor again = host_copy(changed);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_TRUE(at::equal(again, changed));
  // Alive at once: each its own buffer; training changing the source leaves a copy as it was.
  const at::Tensor other = host_copy(changed);
  EXPECT_NE(other.data_ptr(), again.data_ptr());
  changed.add_(1);
  EXPECT_TRUE(at::equal(again, weights * 2));
  EXPECT_TRUE(at::equal(other, weights * 2));
}

}  // namespace
}  // namespace ddp
