// Trainer's input: the run's loader threads and the training loader that lives across epochs.
#include "train/trainer.h"

#include "base/cpus.h"
#include "data/device_feed.h"
#include "data/epoch_sampler.h"
#include "data/loader_options.h"
#include "data/loader_threads.h"

#include <ATen/Parallel.h>

namespace ddp {
namespace {

// The threads a rank's step runs on: the intra-op threads on the CPU; on an accelerator the one that launches it.
int64_t training_threads(const c10::Device& device) { return device.is_cpu() ? at::get_num_threads() : 1; }

}  // namespace

int64_t Trainer::loader_workers() const {
  return resolve_workers(cfg_.data.workers, available_cpus(), ctx_.local_world_size, training_threads(ctx_.device));
}

void Trainer::start_loader_threads() {
  if (loader_threads_) return;
  const int64_t workers = loader_workers();
  if (cfg_.data.workers.automatic)
    reporter_.message("data.workers = \"auto\": " + std::to_string(workers) + " loader thread(s) per rank (" +
                      std::to_string(available_cpus()) + " CPUs / " + std::to_string(ctx_.local_world_size) +
                      " rank(s) on the host - " + std::to_string(training_threads(ctx_.device)) +
                      " training thread(s))");
  if (workers > 0) loader_threads_ = std::make_shared<LoaderThreads>(workers);
}

DeviceFeed& Trainer::training_feed(const EpochSamples& samples) {
  const EpochPosition& position = state_.position;
  if (!train_loader_ || train_loader_->epoch() != position.epoch ||
      train_loader_->next_batch() != position.batch_in_epoch) {
    train_feed_.reset();
    train_loader_ = std::make_unique<BatchLoader>(dataset_.train, samples.indices,
                                                  loader_options(cfg_.data.batch_size, cfg_.data.drop_last),
                                                  position.batch_in_epoch, samples.augment_keys);
    train_feed_ = make_device_feed(*train_loader_, ctx_.device);
  }
  const int64_t next = position.epoch + 1;
  const int64_t steps_left =
      steps_in(train_loader_->num_batches() - position.batch_in_epoch, cfg_.training.grad_accum_steps);
  if (next < epochs_ && state_.global_step + steps_left < total_steps_ && !train_loader_->epoch_planned()) {
    const std::unique_ptr<EpochSampler> sampler = train_sampler();
    sampler->set_epoch(next);
    EpochSamples planned = sampler->samples_from(0);
    train_loader_->plan_epoch(std::move(planned.indices), next, std::move(planned.augment_keys));
  }
  return *train_feed_;
}

void Trainer::end_training_epoch(bool cut) {
  if (!cut && train_loader_ && train_loader_->epoch_planned()) return;
  train_feed_.reset();
  train_loader_.reset();
}

}  // namespace ddp
