// BatchLoader: epochs of batches split into rows for the loader threads, handed out in order, buffers reused.
#include "data/loader.h"

#include "data/image_transforms.h"
#include "data/loader_threads.h"

#include <algorithm>

namespace ddp {
namespace {

// Rows of an in-memory split read as one task: small images go a batch (or a large part of one) at a time, as a
// sample read from a file always goes one at a time.
constexpr int64_t kTaskBytes = 256 << 10;
// Buffers the ring keeps beyond `prefetch`: those the consumer holds (micro-batches of a step, a batch whose copy to
// the device is under way). A consumer that holds more gets buffers of its own.
constexpr size_t kRingSlack = 8;

// Nobody but the ring holds the tensor, its storage, or a view of it.
bool unused(const torch::Tensor& t) { return t.use_count() == 1 && t.storage().use_count() == 1; }

}  // namespace

BatchLoader::BatchLoader(const Split& split, std::vector<int64_t> indices, LoaderOptions options, int64_t start_batch,
                         std::vector<int64_t> augment_keys)
    : split_(split), options_(std::move(options)), mu_(&own_mu_) {
  TORCH_CHECK(options_.batch_size >= 1 && options_.prefetch >= 1, "BatchLoader: batch_size and prefetch must be >= 1");
  TORCH_CHECK(!options_.device_decode || !options_.normalize, "BatchLoader: the device normalises what it decodes");
  if (options_.normalize) table_.emplace(options_.mean, options_.std);
  rows_per_task_ = 1;
  if (!split_.source && split_.images.defined() && split_.images.size(0) > 0)
    rows_per_task_ = std::max<int64_t>(1, kTaskBytes / std::max<int64_t>(1, split_.images[0].numel()));
  const int64_t epoch = options_.epoch;
  plan_epoch(std::move(indices), epoch, std::move(augment_keys));
  epochs_.front()->first = next_ = produce_next_ = std::min(start_batch, epochs_.front()->batches);
  threads_ = options_.threads;
  if (!threads_ && options_.workers > 0) threads_ = std::make_shared<LoaderThreads>(options_.workers);
  if (!threads_) return;
  mu_ = &threads_->mu_;
  threads_->attach(this);
}

BatchLoader::~BatchLoader() {
  if (threads_) threads_->detach(this);
}

void BatchLoader::plan_epoch(std::vector<int64_t> indices, int64_t epoch, std::vector<int64_t> augment_keys) {
  TORCH_CHECK(augment_keys.empty() || augment_keys.size() == indices.size(), "BatchLoader: ", augment_keys.size(),
              " augmentation keys for ", indices.size(), " samples");
  std::lock_guard<std::mutex> lock(*mu_);
  const auto n = static_cast<int64_t>(indices.size()), b = options_.batch_size;
  const int64_t seq = epochs_.empty() ? 0 : epochs_.back()->seq + 1;
  epochs_.push_back(
      std::make_unique<Epoch>(Epoch{seq, std::move(indices), epoch, options_.drop_last ? n / b : (n + b - 1) / b,
                                    /*first=*/0, std::move(augment_keys)}));
  if (front_ended_) {  // next() already said the front epoch's end: the new one follows at once
    epochs_.pop_front();
    next_ = 0;
    front_ended_ = false;
  }
  if (threads_) threads_->work_.notify_all();
}

bool BatchLoader::epoch_planned() {
  std::lock_guard<std::mutex> lock(*mu_);
  return epochs_.size() > 1;
}

BatchLoader::Epoch* BatchLoader::find_epoch(int64_t seq) const {
  for (const auto& e : epochs_)
    if (e->seq == seq) return e.get();
  return nullptr;
}

int64_t BatchLoader::rows_of(const Epoch& e, int64_t batch) const {
  const int64_t begin = batch * options_.batch_size;
  return std::min<int64_t>(options_.batch_size, static_cast<int64_t>(e.indices.size()) - begin);
}

BatchLoader::Epoch* BatchLoader::producing() {
  const Epoch& front = *epochs_.front();
  if (produce_seq_ < front.seq) {  // next() moved on from an epoch whose batches were all started
    produce_seq_ = front.seq;
    produce_next_ = front.first;
  }
  Epoch* e = find_epoch(produce_seq_);
  while (e && produce_next_ >= e->batches) {
    e = find_epoch(++produce_seq_);
    produce_next_ = e ? e->first : 0;
  }
  return e;
}

bool BatchLoader::claim(Task& task) {
  auto hand_out = [&](Pending& p) {
    task = {&p, p.claimed, std::min(p.rows, p.claimed + rows_per_task_)};
    p.claimed = task.end;
    ++p.running;
    return true;
  };
  for (auto& p : pending_)
    if (p->claimed < p->rows) return hand_out(*p);
  if (static_cast<int64_t>(pending_.size()) >= options_.prefetch) return false;
  Epoch* e = producing();
  if (!e) return false;
  const int64_t index = produce_next_++;
  auto batch = std::make_unique<Pending>();
  batch->epoch = e;
  batch->index = index;
  batch->rows = rows_of(*e, index);
  if (options_.device_decode && split_.source) {
    batch->device_rows = std::make_shared<DeviceRows>();
    batch->device_rows->rows.resize(static_cast<size_t>(batch->rows));
    batch->device_rows->source = split_.source;
    batch->device_rows->labels = split_.labels;
  }
  if (!options_.normalize) batch->erase.resize(static_cast<size_t>(batch->rows));
  pending_.push_back(std::move(batch));
  // The source hears of the samples of this batch and the `prefetch` after it, each batch once, so that it may fetch
  // them while the batches before are read.
  if (const int64_t from = std::max(e->told, index), to = std::min(e->batches, index + 1 + options_.prefetch);
      split_.source && to > from) {
    const int64_t begin = from * options_.batch_size;
    const int64_t end = std::min(to * options_.batch_size, static_cast<int64_t>(e->indices.size()));
    split_.source->coming(e->indices.data() + begin, static_cast<size_t>(end - begin));
    e->told = to;
  }
  return hand_out(*pending_.back());
}

void BatchLoader::take_buffers(Pending& batch, c10::IntArrayRef item_sizes) {
  if (!batch.buffers.images.defined()) {
    for (const Buffers& b : ring_)
      if (b.images.sizes().slice(1) == item_sizes && unused(b.images) && unused(b.labels)) {
        batch.buffers = b;
        break;
      }
  }
  if (!batch.buffers.images.defined()) {
    std::vector<int64_t> sizes = {options_.batch_size};
    sizes.insert(sizes.end(), item_sizes.begin(), item_sizes.end());
    const auto host = torch::TensorOptions().pinned_memory(options_.pin_memory);
    batch.buffers.images = torch::empty(
        sizes, host.dtype(options_.normalize ? torch::kFloat32 : torch::kUInt8).memory_format(options_.memory_format));
    batch.buffers.labels = torch::empty({options_.batch_size}, host.dtype(torch::kInt64));
    if (ring_.size() < static_cast<size_t>(options_.prefetch) + kRingSlack) ring_.push_back(batch.buffers);
  }
  TORCH_CHECK(batch.buffers.images.sizes().slice(1) == item_sizes, "sample of batch ", batch.index, " is ", item_sizes,
              ", the batch's others ", batch.buffers.images.sizes().slice(1));
}

void BatchLoader::write_sample(const Task& task, int64_t row, const uint8_t* pixels, c10::IntArrayRef sizes,
                               c10::IntArrayRef strides, int64_t label_index, const std::optional<CropBox>& erase) {
  TORCH_CHECK(sizes.size() == 3, "a sample must be [C, H, W], got ", sizes);
  const int64_t n = split_.size();
  TORCH_CHECK(label_index >= 0 && label_index < n, "sample index ", label_index, " is out of range for a split of ", n);
  Buffers buffers;
  {
    std::lock_guard<std::mutex> lock(*mu_);
    take_buffers(*task.batch, sizes);
    buffers = task.batch->buffers;
  }
  if (pixels) write_row(buffers.images, row, pixels, sizes, strides, table_ ? &*table_ : nullptr);
  if (table_)
    erase_row(buffers.images, row, erase);
  else
    task.batch->erase[static_cast<size_t>(row)] = erase;  // this row's own slot
  buffers.labels.data_ptr<int64_t>()[row] = split_.labels.data_ptr<int64_t>()[label_index * split_.labels.stride(0)];
}

void BatchLoader::run(const Task& task) {
  const Epoch& e = *task.batch->epoch;
  const int64_t first = task.batch->index * options_.batch_size;
  for (int64_t row = task.begin; row < task.end; ++row) {
    const auto position = static_cast<size_t>(first + row);
    const int64_t index = e.indices[position];
    if (split_.source && task.batch->device_rows) {
      const uint64_t seed = sample_seed(options_.seed, e.epoch, e.augment_key(position));
      SampleSource::Prepared p = split_.source->prepare_for_device(index, seed);
      if (p.encoded) {
        const int64_t side = p.encoded->transform.size, label = p.encoded->index;
        write_sample(task, row, nullptr, {3, side, side}, {}, label, p.sample.erase);
        task.batch->device_rows->rows[static_cast<size_t>(row)] = std::move(p.encoded);  // this row's own slot
        continue;
      }
      const torch::Tensor& image = p.sample.image;
      TORCH_CHECK(image.scalar_type() == torch::kUInt8, "sample ", p.sample.index, " is not uint8");
      write_sample(task, row, image.data_ptr<uint8_t>(), image.sizes(), image.strides(), p.sample.index,
                   p.sample.erase);
    } else if (split_.source) {
      const SampleSource::Sample s =
          split_.source->read(index, sample_seed(options_.seed, e.epoch, e.augment_key(position)));
      TORCH_CHECK(s.image.scalar_type() == torch::kUInt8, "sample ", s.index, " is not uint8");
      write_sample(task, row, s.image.data_ptr<uint8_t>(), s.image.sizes(), s.image.strides(), s.index, s.erase);
    } else {
      const torch::Tensor& images = split_.images;
      TORCH_CHECK(index >= 0 && index < images.size(0), "sample index ", index, " is out of range for a split of ",
                  images.size(0));
      write_sample(task, row, images.data_ptr<uint8_t>() + index * images.stride(0), images.sizes().slice(1),
                   images.strides().slice(1), index, std::nullopt);
    }
  }
}

bool BatchLoader::finish(const Task& task, std::exception_ptr error) {
  Pending& p = *task.batch;
  --p.running;
  if (error && !p.error) {
    p.error = error;
    p.claimed = p.rows;  // the batch's other rows are not read
  }
  return p.done();
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock<std::mutex> lock(*mu_);
  if (next_ >= epochs_.front()->batches) {
    if (epochs_.size() > 1) {  // the end of this epoch; the next call begins the next one
      epochs_.pop_front();
      next_ = 0;
    } else {
      front_ended_ = true;
    }
    return std::nullopt;
  }
  if (threads_) {
    ready_.wait(lock, [&] { return !pending_.empty() && pending_.front()->done(); });
  } else {  // no threads: this thread reads the batch's rows
    while (pending_.empty() || !pending_.front()->done()) {
      Task task;
      const bool claimed = claim(task);
      TORCH_INTERNAL_ASSERT(claimed, "BatchLoader: no rows to read for the next batch");
      lock.unlock();
      std::exception_ptr error;
      try {
        run(task);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      finish(task, error);
    }
  }
  Pending& p = *pending_.front();
  if (p.error) std::rethrow_exception(p.error);
  Batch batch = {p.buffers.images, p.buffers.labels, nullptr, {}};
  if (p.rows < options_.batch_size)
    batch = {batch.images.narrow(0, 0, p.rows), batch.labels.narrow(0, 0, p.rows), nullptr, {}};
  if (p.device_rows &&
      std::any_of(p.device_rows->rows.begin(), p.device_rows->rows.end(), [](const auto& r) { return r != nullptr; }))
    batch.device_rows = std::move(p.device_rows);
  for (size_t row = 0; row < p.erase.size(); ++row)
    if (p.erase[row]) batch.erasures.push_back({static_cast<int64_t>(row), *p.erase[row]});
  pending_.pop_front();
  ++next_;
  lock.unlock();
  if (threads_) threads_->work_.notify_all();  // room for one more batch ahead: its rows for every thread
  return batch;
}

int64_t BatchLoader::prefetched() {
  std::lock_guard<std::mutex> lock(*mu_);
  return std::count_if(pending_.begin(), pending_.end(), [](const auto& p) { return p->done(); });
}

}  // namespace ddp
