// BatchLoader: batch k is built by worker k % workers, at most `prefetch` batches ahead of the consumer.
#include "data/loader.h"

#include "base/thread_name.h"
#include "data/image_transforms.h"

namespace ddp {

BatchLoader::BatchLoader(const Split& split, std::vector<int64_t> indices, LoaderOptions options, int64_t start_batch)
    : split_(split), indices_(std::move(indices)), options_(options) {
  const int64_t n = static_cast<int64_t>(indices_.size()), b = options_.batch_size;
  num_batches_ = options_.drop_last ? n / b : (n + b - 1) / b;
  next_ = std::min(start_batch, num_batches_);
  for (int64_t w = 0; w < options_.workers; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Batch BatchLoader::assemble(int64_t batch_index) const {
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t end = std::min<int64_t>(begin + options_.batch_size, static_cast<int64_t>(indices_.size()));
  torch::Tensor idx = torch::from_blob(const_cast<int64_t*>(indices_.data()) + begin, {end - begin}, torch::kInt64);
  const int64_t n = end - begin;
  // The batch's tensors, allocated once (page-locked when asked) and filled in place.
  const auto allocate = [&](const torch::Tensor& like, c10::IntArrayRef item_sizes) {
    std::vector<int64_t> sizes = {n};
    sizes.insert(sizes.end(), item_sizes.begin(), item_sizes.end());
    return torch::empty(sizes, torch::TensorOptions().dtype(like.dtype()).pinned_memory(options_.pin_memory));
  };
  Batch batch;
  if (split_.source) {
    // Read sample by sample, each copied into the batch at once; a replaced sample brings its own label.
    std::vector<int64_t> read;
    for (const int64_t index : c10::ArrayRef<int64_t>(idx.data_ptr<int64_t>(), idx.numel())) {
      SampleSource::Sample s = split_.source->read(index, sample_seed(options_.seed, options_.epoch, index));
      if (!batch.images.defined()) batch.images = allocate(s.image, s.image.sizes());
      TORCH_CHECK(s.image.sizes() == batch.images.sizes().slice(1), "sample ", s.index, " is ", s.image.sizes(),
                  ", the batch's first ", batch.images.sizes().slice(1));
      batch.images[static_cast<int64_t>(read.size())].copy_(s.image);
      read.push_back(s.index);
    }
    idx = torch::tensor(read, torch::kInt64);
  } else {
    batch.images = allocate(split_.images, split_.images.sizes().slice(1));
    at::index_select_out(batch.images, split_.images, 0, idx);
  }
  if (options_.normalize)
    batch.images = normalize_images(batch.images, options_.mean, options_.std, options_.memory_format);
  batch.labels = allocate(split_.labels, split_.labels.sizes().slice(1));
  at::index_select_out(batch.labels, split_.labels, 0, idx);
  return batch;
}

void BatchLoader::worker_loop(int64_t worker_id) {
  name_this_thread("ddp-data-" + std::to_string(worker_id));
  const int64_t workers = options_.workers;
  int64_t k = next_;
  // First batch this worker owns at or after the starting point.
  while (k % workers != worker_id) ++k;
  for (; k < num_batches_; k += workers) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || k < next_ + options_.prefetch; });
      if (stop_) return;
    }
    Batch batch;
    try {
      batch = assemble(k);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ready_.emplace(k, std::move(batch));
    cv_.notify_all();
  }
}

int64_t BatchLoader::prefetched() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(ready_.size());
}

std::optional<Batch> BatchLoader::next() {
  if (next_ >= num_batches_) return std::nullopt;
  if (workers_.empty()) return assemble(next_++);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return error_ || ready_.count(next_) > 0; });
  if (error_) std::rethrow_exception(error_);
  auto node = ready_.extract(next_);
  ++next_;
  lock.unlock();
  cv_.notify_all();
  return std::move(node.mapped());
}

}  // namespace ddp
