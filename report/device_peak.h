// Peak dense TFLOP/s of NVIDIA data-center GPUs for the precision a step's matrix products run in (NVIDIA's
// datasheets, without structured sparsity), for MFU: the model's FLOP/s over the hardware's peak (PaLM, Chowdhery et
// al. 2022, appendix B).
#pragma once

#include <optional>
#include <string>

namespace ddp {

enum class MathPrecision {
  kFp32,      // float32 on CUDA cores
  kTf32,      // float32 convolutions on tensor cores (training.cudnn_allow_tf32, PyTorch's default)
  kBf16Fp16,  // autocast to bfloat16 or float16
};

struct DevicePeak {
  std::string device;  // the table's name for the device ("H100 SXM")
  double tflops = 0;   // one GPU's dense peak in that precision
};

// By torch.cuda.get_device_name's text ("NVIDIA H100 80GB HBM3"); nullopt for a device not in the table.
std::optional<DevicePeak> peak_tflops(const std::string& gpu_name, MathPrecision precision);

const char* precision_name(MathPrecision p);

}  // namespace ddp
