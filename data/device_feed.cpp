// DeviceFeed implementations: pass-through on CPU; side-stream prefetch through c10's device-generic streams/events.
#include "data/device_feed.h"

#include "data/dataset.h"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace ddp {
namespace {

class HostFeed final : public DeviceFeed {
 public:
  explicit HostFeed(BatchLoader& loader) : loader_(loader) {}
  std::optional<Batch> next() override { return loader_.next(); }

 private:
  BatchLoader& loader_;
};

class StreamFeed final : public DeviceFeed {
 public:
  StreamFeed(BatchLoader& loader, c10::Device device)
      : loader_(loader),
        device_(device),
        guard_impl_(device.type()),
        copy_stream_(guard_impl_.getStreamFromGlobalPool(device)),
        copied_(device.type()) {
    start_copy();
  }

  std::optional<Batch> next() override {
    if (!ahead_) return std::nullopt;
    Batch batch = std::move(*ahead_);
    ahead_.reset();
    const c10::Stream current = guard_impl_.getStream(device_);
    copied_.block(current);
    // Allocated on the copy stream, used on the current one: the allocator must not reuse them before that use ends.
    batch.images.record_stream(current);
    batch.labels.record_stream(current);
    const LoaderOptions& o = loader_.options();
    if (!o.normalize) batch.images = normalize_images(batch.images, o.mean, o.std, o.memory_format);
    start_copy();  // overlaps the step that uses `batch`
    return batch;
  }

 private:
  void start_copy() {
    std::optional<Batch> host = loader_.next();
    if (!host) return;
    c10::StreamGuard on_copy_stream(copy_stream_);
    ahead_ = Batch{host->images.to(device_, /*non_blocking=*/true), host->labels.to(device_, /*non_blocking=*/true)};
    copied_.record(copy_stream_);
  }

  BatchLoader& loader_;
  c10::Device device_;
  c10::impl::VirtualGuardImpl guard_impl_;
  c10::Stream copy_stream_;
  c10::Event copied_;
  std::optional<Batch> ahead_;  // on the device, its copy enqueued on copy_stream_
};

}  // namespace

std::unique_ptr<DeviceFeed> make_device_feed(BatchLoader& loader, c10::Device device) {
  if (device.is_cpu()) return std::make_unique<HostFeed>(loader);
  return std::make_unique<StreamFeed>(loader, device);
}

}  // namespace ddp
