// BatchLoader: assembles normalised batches from a list of sample indices, prefetched on worker threads.
#pragma once

#include "data/dataset.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ddp {

struct Batch {
  torch::Tensor images;  // float [B, C, H, W], normalised (uint8 between the loader and the DeviceFeed, see normalize)
  torch::Tensor labels;  // int64 [B]
  int64_t size() const { return labels.size(0); }
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool drop_last = false;  // drop a final partial batch
  int64_t workers = 1;     // 0 = assemble on the calling thread
  int64_t prefetch = 4;    // batches ready ahead of the consumer
  PerChannel mean{0.0};    // one value for all channels, or one per channel
  PerChannel std{1.0};
  // false: batches leave the loader as uint8 and the DeviceFeed normalises them on the device after the copy (a
  // quarter of the bytes to copy and to hold ahead).
  bool normalize = true;
  // The layout the model takes: batches are normalised straight into it, here or on the device (no layout copy in
  // the first layer).
  torch::MemoryFormat memory_format = torch::MemoryFormat::Contiguous;
  // Splits read per sample: each sample's augmentation is keyed by (seed, epoch, sample index).
  uint64_t seed = 0;
  int64_t epoch = 0;
  // Batches assembled straight into page-locked host memory, for an asynchronous copy to a CUDA device
  // (DataLoader(pin_memory=True) without its second copy of the batch; needs a CUDA build with a visible GPU).
  bool pin_memory = false;
};

class BatchLoader {
 public:
  // indices: this rank's samples in order; start_batch skips the first batches (resume inside an epoch).
  BatchLoader(const Split& split, std::vector<int64_t> indices, LoaderOptions options, int64_t start_batch = 0);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t num_batches() const { return num_batches_; }
  // This rank's samples in order: batch b holds [b x batch_size, (b + 1) x batch_size).
  const std::vector<int64_t>& indices() const { return indices_; }
  const LoaderOptions& options() const { return options_; }
  // Next batch in order, or nullopt at the end. Rethrows a worker's error.
  std::optional<Batch> next();
  // Batches assembled and waiting (at most options.prefetch).
  int64_t prefetched();

 private:
  Batch assemble(int64_t batch_index) const;
  void worker_loop(int64_t worker_id);

  const Split& split_;
  std::vector<int64_t> indices_;
  LoaderOptions options_;
  int64_t num_batches_;
  int64_t next_ = 0;  // next batch handed to the consumer

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace ddp
