// nvJPEG decoding of a batch's JPEG rows (hardware batched, else the default backend), transforms on the device, and
// the CPU fallback for what nvJPEG refuses. nvJPEG code only in builds with CUDA and nvJPEG (DDP_WITH_NVJPEG).
#include "data/gpu_decode.h"

#include <stdexcept>
#include <string>

#if defined(DDP_WITH_CUDA) && defined(DDP_WITH_NVJPEG)
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <map>
#include <mutex>
#endif

namespace ddp {

bool gpu_decode_built() {
#if defined(DDP_WITH_CUDA) && defined(DDP_WITH_NVJPEG)
  return true;
#else
  return false;
#endif
}

namespace {

// decode_on_device for a dataset of image files.
bool decode_images_on_device(DecodeChoice decode, c10::Device device) {
  if (decode == DecodeChoice::Cpu) return false;
  if (decode == DecodeChoice::Auto) return device.is_cuda() && gpu_decode_built();
  if (!gpu_decode_built())
    throw std::runtime_error("data.decode = \"gpu\" needs a build of ddptrain with CUDA and nvJPEG, and this one has " +
                             std::string(
#ifdef DDP_WITH_CUDA
                                 "no nvJPEG (CMake found no nvjpeg.h and libnvjpeg)"
#else
                                 "no CUDA"
#endif
                                 ) +
                             "; use data.decode = \"cpu\" or \"auto\"");
  if (!device.is_cuda())
    throw std::runtime_error(
        "data.decode = \"gpu\" decodes JPEGs with nvJPEG on a CUDA device, and this rank trains on " + device.str() +
        " (no GPU visible); use data.decode = \"cpu\" or \"auto\"");
  return true;
}

}  // namespace

bool decode_on_device(const DataConfig& data, c10::Device device) {
  return dataset_row(data.dataset.name).image_files && decode_images_on_device(data.decode, device);
}

#if defined(DDP_WITH_CUDA) && defined(DDP_WITH_NVJPEG)
namespace {

// Throws naming the call and nvJPEG's status: what is left of the decoder is unusable then.
void nvjpeg_check(nvjpegStatus_t status, const char* what) {
  if (status != NVJPEG_STATUS_SUCCESS)
    throw std::runtime_error(std::string("nvJPEG: ") + what + " failed (nvjpegStatus_t " + std::to_string(status) +
                             ")");
}

// One row to decode: where its pixels go and the planar RGB buffer nvJPEG writes (pitch = width).
struct JpegRow {
  int64_t row = 0;
  const EncodedSample* sample = nullptr;
  nvjpegImage_t out{};
  torch::Tensor planes;  // uint8 [3, H, W], a view of the batch's output buffer
  bool decoded = false;
};

class NvjpegDecoder final : public DeviceDecoder {
 public:
  explicit NvjpegDecoder(c10::Device device) : device_(device) {
    c10::cuda::CUDAGuard guard(device);
    // The hardware decoder where the GPU has one (nvjpegCreateEx answers NVJPEG_STATUS_ARCH_MISMATCH elsewhere, as
    // torchvision's decode_jpegs_cuda expects), else the default backend. Chroma is upsampled by interpolation where
    // the library offers it, as libjpeg's "fancy upsampling" (the CPU path's) does.
    for (const nvjpegBackend_t backend : {NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_DEFAULT}) {
      for (const unsigned flags :
           {unsigned{NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION}, unsigned{NVJPEG_FLAGS_DEFAULT}}) {
        if (nvjpegCreateEx(backend, nullptr, nullptr, flags, &handle_) == NVJPEG_STATUS_SUCCESS) {
          hardware_ = backend == NVJPEG_BACKEND_HARDWARE;
          break;
        }
        handle_ = nullptr;
      }
      if (handle_) break;
    }
    if (!handle_) throw std::runtime_error("nvJPEG: cannot create a decoder on " + device.str());
    nvjpeg_check(nvjpegJpegStateCreate(handle_, &batched_state_), "nvjpegJpegStateCreate");
    nvjpeg_check(nvjpegDecoderCreate(handle_, NVJPEG_BACKEND_DEFAULT, &decoder_), "nvjpegDecoderCreate");
    nvjpeg_check(nvjpegDecoderStateCreate(handle_, decoder_, &decoder_state_), "nvjpegDecoderStateCreate");
    for (auto& b : pinned_) nvjpeg_check(nvjpegBufferPinnedCreate(handle_, nullptr, &b), "nvjpegBufferPinnedCreate");
    nvjpeg_check(nvjpegBufferDeviceCreate(handle_, nullptr, &device_buffer_), "nvjpegBufferDeviceCreate");
    for (auto& s : streams_) nvjpeg_check(nvjpegJpegStreamCreate(handle_, &s), "nvjpegJpegStreamCreate");
    nvjpeg_check(nvjpegDecodeParamsCreate(handle_, &params_), "nvjpegDecodeParamsCreate");
    nvjpeg_check(nvjpegDecodeParamsSetOutputFormat(params_, NVJPEG_OUTPUT_RGB), "nvjpegDecodeParamsSetOutputFormat");
    nvjpeg_check(nvjpegStateAttachDeviceBuffer(decoder_state_, device_buffer_), "nvjpegStateAttachDeviceBuffer");
  }

  ~NvjpegDecoder() override {
    c10::cuda::CUDAGuard guard(device_);
    c10::cuda::device_synchronize();  // nothing of ours may still run on the buffers released below
    if (params_) nvjpegDecodeParamsDestroy(params_);
    for (auto& s : streams_)
      if (s) nvjpegJpegStreamDestroy(s);
    if (device_buffer_) nvjpegBufferDeviceDestroy(device_buffer_);
    for (auto& b : pinned_)
      if (b) nvjpegBufferPinnedDestroy(b);
    if (decoder_state_) nvjpegJpegStateDestroy(decoder_state_);
    if (decoder_) nvjpegDecoderDestroy(decoder_);
    if (batched_state_) nvjpegJpegStateDestroy(batched_state_);
    if (handle_) nvjpegDestroy(handle_);
  }

  void decode(const DeviceRows& rows, const torch::Tensor& images, const torch::Tensor& labels) override {
    c10::cuda::CUDAGuard guard(device_);
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device_.index());
    std::vector<JpegRow> jpegs;
    const int64_t n = std::min<int64_t>(images.size(0), static_cast<int64_t>(rows.rows.size()));
    for (int64_t r = 0; r < n; ++r) {
      const auto& e = rows.rows[static_cast<size_t>(r)];
      if (!e) continue;
      JpegRow j;
      j.row = r;
      j.sample = e.get();
      jpegs.push_back(j);
    }
    // A chunk of rows at a time, at most kChunkBytes of decoded pixels (or one image) on the device at once: a batch
    // of large photos would otherwise ask for gigabytes.
    for (size_t begin = 0, end = 0; begin < jpegs.size(); begin = end) {
      int64_t bytes = 0;
      for (end = begin; end < jpegs.size(); ++end) {
        const int64_t more = 3 * jpegs[end].sample->height * jpegs[end].sample->width;
        if (end > begin && bytes + more > kChunkBytes) break;
        bytes += more;
      }
      std::vector<JpegRow> chunk(jpegs.begin() + static_cast<std::ptrdiff_t>(begin),
                                 jpegs.begin() + static_cast<std::ptrdiff_t>(end));
      decode_chunk(rows, chunk, bytes, stream, images, labels);
    }
  }

 private:
  static constexpr int64_t kChunkBytes = int64_t{512} << 20;

  void decode_chunk(const DeviceRows& rows, std::vector<JpegRow>& jpegs, int64_t bytes,
                    const c10::cuda::CUDAStream& stream, const torch::Tensor& images, const torch::Tensor& labels) {
    // One output buffer for the chunk, planar RGB per image, allocated on this stream.
    const torch::Tensor out = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device_));
    int64_t at = 0;
    for (JpegRow& j : jpegs) {
      const int64_t h = j.sample->height, w = j.sample->width;
      j.planes = out.narrow(0, at, 3 * h * w).view({3, h, w});
      at += 3 * h * w;
      for (int c = 0; c < 3; ++c) {
        j.out.channel[c] = j.planes[c].data_ptr<uint8_t>();
        j.out.pitch[c] = static_cast<size_t>(w);
      }
    }
    decode_batched(jpegs, stream);
    for (JpegRow& j : jpegs)
      if (!j.decoded) decode_one(j, stream);
    transform(jpegs, images);
    for (const JpegRow& j : jpegs)
      if (!j.decoded) read_on_cpu(rows, j, images, labels);
  }

  // The JPEGs the batched decode takes (with a hardware decoder: those it supports, nvjpegDecodeBatchedSupported),
  // in one nvjpegDecodeBatched call; a failed call leaves them to decode_one.
  void decode_batched(std::vector<JpegRow>& jpegs, const c10::cuda::CUDAStream& stream) {
    std::vector<JpegRow*> batch;
    for (JpegRow& j : jpegs) {
      if (hardware_) {
        int unsupported = 1;
        const auto& b = j.sample->bytes;
        if (nvjpegJpegStreamParseHeader(handle_, b.data(), b.size(), streams_[0]) != NVJPEG_STATUS_SUCCESS ||
            nvjpegDecodeBatchedSupported(handle_, streams_[0], &unsupported) != NVJPEG_STATUS_SUCCESS || unsupported)
          continue;
      }
      batch.push_back(&j);
    }
    if (batch.empty()) return;
    std::vector<const unsigned char*> data;
    std::vector<size_t> lengths;
    std::vector<nvjpegImage_t> outs;
    for (JpegRow* j : batch) {
      data.push_back(j->sample->bytes.data());
      lengths.push_back(j->sample->bytes.size());
      outs.push_back(j->out);
    }
    const int count = static_cast<int>(batch.size());
    if (nvjpegDecodeBatchedInitialize(handle_, batched_state_, count, 1, NVJPEG_OUTPUT_RGB) != NVJPEG_STATUS_SUCCESS ||
        nvjpegDecodeBatched(handle_, batched_state_, data.data(), lengths.data(), outs.data(), stream.stream()) !=
            NVJPEG_STATUS_SUCCESS)
      return;
    for (JpegRow* j : batch) j->decoded = true;
  }

  // One JPEG through the default backend's decoupled phases (host, transfer, device), as torchvision decodes what the
  // hardware decoder does not take; the pinned buffers alternate, the stream synchronised before one is reused.
  void decode_one(JpegRow& j, const c10::cuda::CUDAStream& stream) {
    const auto& b = j.sample->bytes;
    nvjpegJpegStream_t js = streams_[next_];
    if (nvjpegJpegStreamParse(handle_, b.data(), b.size(), 0, 0, js) != NVJPEG_STATUS_SUCCESS) return;
    if (nvjpegStateAttachPinnedBuffer(decoder_state_, pinned_[next_]) != NVJPEG_STATUS_SUCCESS) return;
    if (nvjpegDecodeJpegHost(handle_, decoder_, decoder_state_, params_, js) != NVJPEG_STATUS_SUCCESS) return;
    stream.synchronize();
    if (nvjpegDecodeJpegTransferToDevice(handle_, decoder_, decoder_state_, js, stream.stream()) !=
        NVJPEG_STATUS_SUCCESS)
      return;
    next_ = 1 - next_;
    if (nvjpegDecodeJpegDevice(handle_, decoder_, decoder_state_, &j.out, stream.stream()) != NVJPEG_STATUS_SUCCESS)
      return;
    j.decoded = true;
  }

  // The decoded rows' transforms (apply_device_transform: float32 on this stream), rounded as a batch, into their rows.
  static void transform(const std::vector<JpegRow>& jpegs, const torch::Tensor& images) {
    std::vector<int64_t> rows;
    for (const JpegRow& j : jpegs)
      if (j.decoded) rows.push_back(j.row);
    if (rows.empty()) return;
    const int64_t side = images.size(2);
    torch::Tensor staged = torch::empty({static_cast<int64_t>(rows.size()), 3, side, images.size(3)},
                                        images.options().dtype(torch::kFloat32));
    int64_t k = 0;
    for (const JpegRow& j : jpegs)
      if (j.decoded) staged[k++].copy_(apply_device_transform(j.planes, j.sample->transform));
    const torch::Tensor index = torch::tensor(rows, torch::kInt64).to(images.device(), /*non_blocking=*/true);
    images.index_copy_(0, index, staged.round_().to(torch::kUInt8));
  }

  // A row nvJPEG refused: read on the CPU from its sample on (SampleSource::read: the CPU path's decode, errors and
  // replacements); its pixels and label into the batch.
  static void read_on_cpu(const DeviceRows& rows, const JpegRow& j, const torch::Tensor& images,
                          const torch::Tensor& labels) {
    const SampleSource::Sample s = rows.source->read(j.sample->index, j.sample->seed);
    images[j.row].copy_(s.image);
    if (s.index != j.sample->index) labels[j.row].fill_(rows.labels[s.index].item<int64_t>());
  }

  c10::Device device_;
  nvjpegHandle_t handle_ = nullptr;
  bool hardware_ = false;
  nvjpegJpegState_t batched_state_ = nullptr;
  nvjpegJpegDecoder_t decoder_ = nullptr;
  nvjpegJpegState_t decoder_state_ = nullptr;
  nvjpegBufferPinned_t pinned_[2] = {nullptr, nullptr};
  nvjpegBufferDevice_t device_buffer_ = nullptr;
  nvjpegJpegStream_t streams_[2] = {nullptr, nullptr};
  nvjpegDecodeParams_t params_ = nullptr;
  int next_ = 0;  // the pinned buffer and stream of the next decode_one
};

}  // namespace

std::shared_ptr<DeviceDecoder> device_decoder(c10::Device device) {
  static std::mutex mu;
  // Never destroyed: at exit the CUDA runtime may be gone before static destructors run (torchvision keeps its nvJPEG
  // decoder for the same reason).
  static auto* decoders = new std::map<c10::DeviceIndex, std::shared_ptr<DeviceDecoder>>();
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<DeviceDecoder>& d = (*decoders)[device.index()];
  if (!d) d = std::make_shared<NvjpegDecoder>(device);
  return d;
}

#else

std::shared_ptr<DeviceDecoder> device_decoder(c10::Device device) {
  decode_images_on_device(DecodeChoice::Gpu, device);  // throws: this build has no nvJPEG
  throw std::logic_error("device_decoder: no nvJPEG in this build");
}

#endif

}  // namespace ddp
