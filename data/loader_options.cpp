// The loader a run configures: LoaderOptions from [data], data.workers resolved.
#include "data/loader_options.h"

#include "data/gpu_decode.h"

#include <algorithm>

namespace ddp {

int64_t resolve_workers(const IntOrAuto& workers, int64_t cpus, int64_t local_ranks, int64_t training_threads) {
  if (!workers.automatic) return workers.value;
  const int64_t per_rank = cpus / std::max<int64_t>(1, local_ranks);
  return std::clamp<int64_t>(per_rank - training_threads, 1, 64);
}

LoaderOptions configured_loader(const DataConfig& data, int64_t batch_size, bool drop_last, int64_t workers,
                                c10::Device device, torch::MemoryFormat memory_format, uint64_t seed) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.drop_last = drop_last;
  o.workers = workers;
  o.prefetch = data.prefetch;
  o.mean = data.mean;
  o.std = data.std;
  o.seed = seed;
  // Page-locked host batches make the device copy asynchronous (DataLoader's pin_memory=True).
  o.pin_memory = device.is_cuda() && data.pin_memory;
  // On an accelerator the uint8 images are copied and normalised there; either way into the layout the model takes.
  o.normalize = device.is_cpu();
  o.memory_format = memory_format;
  o.device_decode = decode_on_device(data, device);
  return o;
}

}  // namespace ddp
