// DistributedSampler: a line-by-line port of torch/utils/data/distributed.py (PyTorch 2.11) on ATen's randperm.
#include "data/distributed_sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ddp {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last, int64_t batch_size)
    : size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last),
      batch_size_(batch_size) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw std::invalid_argument("DistributedSampler: invalid rank " + std::to_string(rank) + ", should be in [0, " +
                                std::to_string(num_replicas - 1) + "]");
  // Python accepts an empty dataset (every rank then yields nothing); only a negative size is meaningless here.
  if (dataset_size < 0) throw std::invalid_argument("DistributedSampler: negative dataset size");
  if (batch_size < 1) throw std::invalid_argument("DistributedSampler: batch size below 1");
  if (drop_last && size_ % num_replicas != 0)
    num_samples_ = (size_ - num_replicas + num_replicas - 1) / num_replicas;  // ceil((N - R) / R)
  else
    num_samples_ = (size_ + num_replicas - 1) / num_replicas;  // ceil(N / R)
}

std::vector<int64_t> epoch_order(int64_t size, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  if (shuffle) {
    at::Generator g = at::detail::createCPUGenerator();
    g.set_current_seed(seed + static_cast<uint64_t>(epoch));
    const at::Tensor perm = at::randperm(size, g, at::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    order.assign(p, p + size);
  } else {
    for (int64_t i = 0; i < size; ++i) order[static_cast<size_t>(i)] = i;
  }
  return order;
}

std::vector<int64_t> DistributedSampler::global_indices() const {
  std::vector<int64_t> indices = epoch_order(size_, shuffle_, seed_, epoch_);
  const int64_t total = total_size();
  if (!drop_last_) {
    // Python: indices += indices[:pad] or (indices * ceil(pad / len))[:pad]: both repeat from the start.
    const int64_t n = static_cast<int64_t>(indices.size());
    for (int64_t i = 0; static_cast<int64_t>(indices.size()) < total; ++i) indices.push_back(indices[i % n]);
  } else {
    indices.resize(total);
  }
  return indices;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all = global_indices(), mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total_size(); i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

std::vector<int64_t> DistributedSampler::indices_from(int64_t offset) const {
  if (offset == 0) return indices();
  // Positions [offset, end) of the order, past its end repeating it from the start (global_indices' padding).
  const int64_t rest = std::max<int64_t>(0, size_ - offset);
  int64_t end = offset + rest;
  if (drop_last_) {
    end = offset + rest / num_replicas_ * num_replicas_;
  } else {
    const int64_t last = rest % (batch_size_ * num_replicas_);  // samples of the last global batch (0: none short)
    if (last > 0 && last < num_replicas_) end += num_replicas_ - last;
  }
  const std::vector<int64_t> order = epoch_order(size_, shuffle_, seed_, epoch_);
  std::vector<int64_t> mine;
  for (int64_t p = offset + rank_; p < end; p += num_replicas_) mine.push_back(order[static_cast<size_t>(p % size_)]);
  return mine;
}

std::vector<int64_t> eval_shard(int64_t size, int64_t num_replicas, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t i = rank; i < size; i += num_replicas) out.push_back(i);
  return out;
}

}  // namespace ddp
