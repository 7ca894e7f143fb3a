// AutocastGuard: enter/exit of a CPU (bf16) or CUDA (fp16/bf16) autocast region, mirroring torch.autocast.
#include "amp/autocast.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>

namespace ddp {
namespace {

void check_dtype(c10::Device device, c10::ScalarType dtype) {
  if (device.is_cpu()) {
    if (dtype == c10::kHalf) throw std::invalid_argument("amp.dtype = fp16 needs a CUDA device; use bf16 on CPU");
    if (dtype != c10::kBFloat16)
      throw std::invalid_argument(std::string("CPU autocast supports only bf16, got ") + c10::toString(dtype));
  } else if (device.is_cuda()) {
    if (dtype != c10::kHalf && dtype != c10::kBFloat16)
      throw std::invalid_argument(std::string("CUDA autocast supports fp16 or bf16, got ") + c10::toString(dtype));
  }
}

}  // namespace

c10::ScalarType amp_dtype_from_name(const std::string& name) {
  if (name == "bf16") return c10::kBFloat16;
  if (name == "fp16") return c10::kHalf;
  throw std::invalid_argument("amp.dtype must be bf16 or fp16, got '" + name + "'");
}

AutocastGuard::AutocastGuard(c10::Device device, bool enabled, c10::ScalarType dtype) : on_cuda_(device.is_cuda()) {
  if (!device.is_cpu() && !device.is_cuda())
    throw std::invalid_argument("autocast supports cpu and cuda devices, got " + device.str());
  if (enabled) check_dtype(device, dtype);
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  if (on_cuda_) {
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(enabled);
    // ATen accepts only bf16 as the CPU dtype; a disabled region with another dtype keeps the current one.
    at::autocast::set_autocast_cpu_dtype(dtype == c10::kBFloat16 ? dtype : prev_dtype_);
  }
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (on_cuda_) {
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
  } else {
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

}  // namespace ddp
