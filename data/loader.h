// BatchLoader: batches of a split in the order of a list of sample indices, assembled ahead on loader threads.
#pragma once

#include "data/batch_rows.h"
#include "data/dataset.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace ddp {

class LoaderThreads;

// The rows of a batch whose files the training device decodes (LoaderOptions::device_decode): per row its file and
// transform, null for the rows whose pixels the loader wrote. Their rows of Batch::images hold no pixels yet; a row
// the device cannot decode after all is read again on the CPU through `source` (SampleSource::read).
struct DeviceRows {
  std::vector<std::shared_ptr<const EncodedSample>> rows;  // by row of the batch
  std::shared_ptr<const SampleSource> source;
  torch::Tensor labels;  // the split's (int64 [N], CPU): a replaced row's label
};

struct Batch {
  torch::Tensor images;  // float [B, C, H, W], normalised (uint8 between the loader and the DeviceFeed, see normalize)
  torch::Tensor labels;  // int64 [B]
  std::shared_ptr<const DeviceRows> device_rows;  // null unless some rows are left for the device to decode
  // The rows' v2.RandomErasing boxes while the images are uint8: zeroed after the normalisation on the device
  // (erase_rows). Empty once normalised here (write_row erased them) and where no row is erased.
  std::vector<RowErasure> erasures = {};
  int64_t size() const { return labels.size(0); }
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool drop_last = false;  // drop a final partial batch
  int64_t workers = 1;     // threads that read and assemble samples; 0 = assemble on the calling thread
  int64_t prefetch = 4;    // batches under assembly or ready ahead of the consumer
  PerChannel mean{0.0};    // one value for all channels, or one per channel
  PerChannel std{1.0};
  // false: batches leave the loader as uint8 and the DeviceFeed normalises them on the device after the copy (a
  // quarter of the bytes to copy and to hold ahead).
  bool normalize = true;
  // The layout the model takes: batches are assembled straight into it, here or on the device (no layout copy in
  // the first layer).
  torch::MemoryFormat memory_format = torch::MemoryFormat::Contiguous;
  // Splits read per sample: each sample's augmentation is keyed by (seed, epoch, its augmentation key: the sample
  // index unless the sampler repeats samples).
  uint64_t seed = 0;
  int64_t epoch = 0;
  // Batches assembled straight into page-locked host memory, for an asynchronous copy to a CUDA device
  // (DataLoader(pin_memory=True) without its second copy of the batch; needs a CUDA build with a visible GPU).
  bool pin_memory = false;
  // The training device decodes the JPEGs of a split read per sample (data.decode = "gpu", with normalize false): the
  // loader threads read those files and draw their transforms (SampleSource::prepare_for_device), and each batch
  // carries them in Batch::device_rows for the DeviceFeed; other files are decoded here as always.
  bool device_decode = false;
  // Threads shared by the run's loaders (the training loader and each evaluation's); null: the loader starts its
  // own `workers` threads.
  std::shared_ptr<LoaderThreads> threads;
};

// The samples of a batch are read in parallel, a row each, by every loader thread; at most `prefetch` batches are
// under assembly or ready ahead of the consumer, so every thread is busy whatever `prefetch` says (DataLoader's
// prefetch_factor counts batches per worker process instead, each process assembling whole batches). Batches are
// assembled into buffers the loader reuses once nothing outside it holds them any more (page-locked ones too: the
// CUDA DeviceFeed holds a batch until its copy to the device is done). The batches and their order do not depend on
// the number of threads.
class BatchLoader {
 public:
  // indices: this rank's samples of epoch options.epoch in order; start_batch skips the first batches (resume
  // inside an epoch). augment_keys: each sample's augmentation key (EpochSamples), empty for its index.
  BatchLoader(const Split& split, std::vector<int64_t> indices, LoaderOptions options, int64_t start_batch = 0,
              std::vector<int64_t> augment_keys = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Another epoch after those given so far, from its first batch: the threads go on into it as soon as the epoch
  // before has no batch left to start (DataLoader(persistent_workers=True) keeps its workers across epochs; here the
  // next epoch's first batches are also assembled while the last steps of the one before run).
  void plan_epoch(std::vector<int64_t> indices, int64_t epoch, std::vector<int64_t> augment_keys = {});
  // Whether an epoch is planned after the one next() hands out.
  bool epoch_planned();

  // The epoch next() hands out: its number, batches, next batch and samples in order (batch b holds
  // [b x batch_size, (b + 1) x batch_size)).
  int64_t epoch() const { return epochs_.front()->epoch; }
  int64_t num_batches() const { return epochs_.front()->batches; }
  int64_t next_batch() const { return next_; }
  const std::vector<int64_t>& indices() const { return epochs_.front()->indices; }
  const LoaderOptions& options() const { return options_; }
  // Next batch of the epoch in order, or nullopt at its end; the call after that begins the next planned epoch (if
  // none is planned, every call is nullopt until one is). Rethrows the error of a sample of the batch.
  std::optional<Batch> next();
  // Batches assembled and waiting (at most options.prefetch).
  int64_t prefetched();

 private:
  friend class LoaderThreads;
  struct Epoch {
    int64_t seq;  // 0, 1, ... in the order they were given
    std::vector<int64_t> indices;
    int64_t epoch, batches, first;
    std::vector<int64_t> augment_keys;  // empty: the indices
    int64_t told = 0;                   // its batches below this one are told to the source (SampleSource::coming)
    // Row `position`'s augmentation key.
    int64_t augment_key(size_t position) const {
      return augment_keys.empty() ? indices[position] : augment_keys[position];
    }
  };
  struct Buffers {
    torch::Tensor images, labels;  // a whole batch's, allocated once and reused
  };
  // A batch under assembly or ready.
  struct Pending {
    const Epoch* epoch = nullptr;
    int64_t index = 0, rows = 0;
    int64_t claimed = 0, running = 0;           // rows handed to threads; tasks not finished
    Buffers buffers;                            // undefined until its first sample is read
    std::shared_ptr<DeviceRows> device_rows;    // with options.device_decode: each thread sets the rows it reads
    std::vector<std::optional<CropBox>> erase;  // uint8 batches: each row's erased box, set by the thread reading it
    std::exception_ptr error;
    bool done() const { return claimed == rows && running == 0; }
  };
  // Rows [begin, end) of a pending batch, read by one thread.
  struct Task {
    Pending* batch = nullptr;
    int64_t begin = 0, end = 0;
  };

  // Under the lock: hands out the next rows to read, starting the next batch when fewer than `prefetch` are ahead
  // (and telling the source of the samples of the batches up to `prefetch` after it, SampleSource::coming).
  bool claim(Task& task);
  // Without the lock: reads the rows and writes them into the batch.
  void run(const Task& task);
  // Under the lock: the rows are written, or failed with `error`. True when that completes their batch.
  bool finish(const Task& task, std::exception_ptr error);
  Epoch* find_epoch(int64_t seq) const;
  // Under the lock: the epoch the next batch is started from (past those whose batches are all started), or null
  // while none is planned.
  Epoch* producing();
  int64_t rows_of(const Epoch& e, int64_t batch) const;
  // Under the lock: the batch's buffers, taken from the ring (those nobody outside holds) or allocated for items of
  // `item_sizes`.
  void take_buffers(Pending& batch, c10::IntArrayRef item_sizes);
  // The sample's pixels (none: left for the device) and label into its row; its erased box zeroed once normalised
  // (here, or on the device for a uint8 batch).
  void write_sample(const Task& task, int64_t row, const uint8_t* pixels, c10::IntArrayRef sizes,
                    c10::IntArrayRef strides, int64_t label_index, const std::optional<CropBox>& erase);

  const Split& split_;
  LoaderOptions options_;
  std::optional<NormalizeTable> table_;  // when normalize
  int64_t rows_per_task_;

  std::shared_ptr<LoaderThreads> threads_;  // null: batches are assembled in next()
  std::mutex own_mu_;
  std::mutex* mu_;                 // the threads' lock, or own_mu_: guards everything below
  std::condition_variable ready_;  // a batch is done, or no thread runs a task of this loader

  std::deque<std::unique_ptr<Epoch>> epochs_;     // front: the epoch next() hands out; then the planned ones
  int64_t next_ = 0;                              // its next batch
  bool front_ended_ = false;                      // next() said its end
  int64_t produce_seq_ = 0, produce_next_ = 0;    // the next batch to start
  std::deque<std::unique_ptr<Pending>> pending_;  // in hand-out order
  std::vector<Buffers> ring_;
  int64_t running_ = 0;  // tasks the threads are running
};

}  // namespace ddp
