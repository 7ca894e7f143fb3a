// host_copy: a tensor's values copied into host memory; a CPU tensor's copy in a buffer the last checkpoint's copies
// let go, when one of its size is free.
#include "base/host_copy.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace ddp {
namespace {

// Host buffers of the copies let go, by size, for the next copies of the same tensors (as the CUDA caching host
// allocator keeps pinned blocks): a checkpoint's copy then writes into pages the last one faulted in instead of
// fresh ones (a copy of ResNet-50's weights and momentum: about 4x faster once warm). Never more kept than were in
// use at once.
class RecycledHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    void* data = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = free_.find(bytes); it != free_.end()) {
        data = it->second;
        free_.erase(it);
        kept_ -= bytes;
      }
      live_ += bytes;
      peak_ = std::max(peak_, live_);
    }
    if (!data) data = c10::alloc_cpu(bytes);
    return {data, new Block{data, bytes}, &release, c10::Device(c10::kCPU)};
  }
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }

  static RecycledHostAllocator& get() {
    static auto* allocator = new RecycledHostAllocator;  // never destroyed: copies may outlive static destructors
    return *allocator;
  }

 private:
  struct Block {
    void* data;
    size_t bytes;
  };
  static void release(void* context) {
    const Block block = *static_cast<Block*>(context);
    delete static_cast<Block*>(context);
    RecycledHostAllocator& self = get();
    {
      std::lock_guard<std::mutex> lock(self.mu_);
      self.live_ -= block.bytes;
      if (self.kept_ + self.live_ + block.bytes <= self.peak_) {
        self.free_.emplace(block.bytes, block.data);
        self.kept_ += block.bytes;
        return;
      }
    }
    c10::free_cpu(block.data);
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t kept_ = 0, live_ = 0, peak_ = 0;
};

}  // namespace

at::Tensor host_copy(const at::Tensor& t) {
  const at::Tensor values = t.detach();
  if (values.device().is_cpu()) {
    // clone()'s layout where it keeps the strides (memory_format = preserve on a dense tensor, as every tensor of a
    // model's or an optimizer's state is); clone() itself otherwise.
    if (!values.is_non_overlapping_and_dense()) return values.clone();
    at::Tensor host =
        at::detail::empty_strided_generic(values.sizes(), values.strides(), &RecycledHostAllocator::get(),
                                          c10::DispatchKeySet(c10::DispatchKey::CPU), values.scalar_type());
    host.copy_(values);
    return host;
  }
  at::Tensor host = at::empty_like(values, values.options().device(at::kCPU).pinned_memory(true));
  host.copy_(values, /*non_blocking=*/false);
  return host;
}

}  // namespace ddp
