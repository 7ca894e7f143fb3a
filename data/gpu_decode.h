// DeviceDecoder: the JPEG rows of a batch decoded by nvJPEG and transformed on the CUDA device (data.decode = "gpu").
#pragma once

#include "data/loader.h"

#include <memory>

namespace ddp {

// Whether this build decodes JPEGs on the GPU: CUDA and nvJPEG compiled in.
bool gpu_decode_built();

// data.decode for the loader of a rank training on `device`: true for "gpu", and for "auto" on a CUDA device of a
// build with nvJPEG; false for "cpu" and for datasets that read no image files. Throws a one-line std::runtime_error
// for "gpu" where it cannot run: a rank not on a CUDA device, a build without CUDA or nvJPEG.
bool decode_on_device(const DataConfig& data, c10::Device device);

class DeviceDecoder {
 public:
  virtual ~DeviceDecoder() = default;
  // Writes the pixels of the rows in `rows` into `images` (the batch's uint8 [B, 3, S, S] on the device), each decoded
  // and transformed there, and their labels where a row was replaced; all enqueued on the device's current stream,
  // which the bytes of `rows` must outlive. A row nvJPEG cannot decode is read on the CPU instead
  // (SampleSource::read), which throws or replaces it as the CPU path does.
  virtual void decode(const DeviceRows& rows, const torch::Tensor& images, const torch::Tensor& labels) = 0;
};

// The decoder of a CUDA device, made at its first use and kept for the process (its nvJPEG handle is costly to make;
// the training and evaluation feeds use it in turn, from the training thread): nvJPEG's hardware decoder
// (NVJPEG_BACKEND_HARDWARE, A100/H100/H200) for the baseline JPEGs it takes, batched, and its default backend for the
// rest, one image at a time; without a hardware decoder every JPEG through the default backend's batched decode.
// Throws where this build has no nvJPEG, or nvJPEG cannot start on the device.
std::shared_ptr<DeviceDecoder> device_decoder(c10::Device device);

}  // namespace ddp
