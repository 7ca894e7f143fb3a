// version_text: ddptrain's and LibTorch's versions, the CUDA stack this build was compiled with, and visible GPUs.
#include "report/version.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/headeronly/version.h>
#ifdef DDP_WITH_CUDA
#include <nccl.h>
#endif

#include <sstream>

namespace ddp {
#ifdef DDP_WITH_CUDA
namespace {

// 13000 -> "13.0"; 91900 -> "9.19.0" (cuDNN 9+: major*10000 + minor*100 + patch).
std::string cuda_version(long v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
std::string cudnn_version(long v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

}  // namespace
#endif

std::string version_text() {
  std::ostringstream os;
  os << "ddptrain " << DDPTRAIN_VERSION << "\n"
     << "LibTorch " << TORCH_VERSION << "\n";
#ifdef DDP_WITH_CUDA
  const auto& hooks = at::detail::getCUDAHooks();
  os << "CUDA " << cuda_version(hooks.versionCUDART()) << " | cuDNN "
     << (hooks.hasCuDNN() ? cudnn_version(hooks.versionCuDNN()) : std::string("none")) << " | NCCL " << NCCL_MAJOR
     << "." << NCCL_MINOR << "." << NCCL_PATCH << " (compiled in)\n";
#else
  os << "CUDA none (built without the CUDA/NCCL path)\n";
#endif
  const int gpus = static_cast<int>(torch::cuda::device_count());
  os << "GPUs visible: " << gpus << (gpus == 0 ? " (device cpu)" : "") << "\n";
  return os.str();
}

}  // namespace ddp
