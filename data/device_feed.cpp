// DeviceFeed implementations: pass-through on CPU; side-stream prefetch through c10's device-generic streams/events.
#include "data/device_feed.h"

#include "data/dataset.h"
#include "data/gpu_decode.h"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <deque>

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
        normalize_(loader.options().mean, loader.options().std, device),
        decoder_(loader.options().device_decode ? device_decoder(device) : nullptr) {}

  ~StreamFeed() override {
    for (const Copy& c : copies_) c.done.synchronize();  // the loader may reuse their host buffers once they end
  }

  std::optional<Batch> next() override {
    release_copied();
    if (copies_.empty() || copies_.back().handed_out) {
      if (epoch_ended_) {  // the loader said the epoch's end after the last copy: say it now, once
        epoch_ended_ = false;
        return std::nullopt;
      }
      if (!start_copy()) return std::nullopt;
    }
    Copy& c = copies_.back();
    const c10::Stream current = guard_impl_.getStream(device_);
    c.done.block(current);
    // Allocated on the copy stream, used on the current one: the allocator must not reuse them before that use ends.
    c.device.images.record_stream(current);
    c.device.labels.record_stream(current);
    c.handed_out = true;
    Batch batch = std::move(c.device);
    if (!loader_.options().normalize) {
      batch.images = normalize_(batch.images, loader_.options().memory_format);
      erase_rows(batch.images, batch.erasures);  // v2.RandomErasing after Normalize
    }
    epoch_ended_ = !start_copy();  // overlaps the step that uses `batch`
    return batch;
  }

 private:
  // A batch's copy to the device, enqueued on the copy stream; its host buffers stay held until the copy is done.
  struct Copy {
    Batch host, device;
    c10::Event done;
    bool handed_out = false;
  };

  // Starts copying the loader's next batch; false at the end of the loader's epoch.
  bool start_copy() {
    std::optional<Batch> host = loader_.next();
    if (!host) return false;
    c10::StreamGuard on_copy_stream(copy_stream_);
    Batch device = {host->images.to(device_, /*non_blocking=*/true), host->labels.to(device_, /*non_blocking=*/true),
                    nullptr, host->erasures};
    // The rows whose files the device decodes, on the copy stream too; the file bytes are held with the host batch.
    if (host->device_rows) decoder_->decode(*host->device_rows, device.images, device.labels);
    copies_.push_back(Copy{std::move(*host), std::move(device), c10::Event(device_.type())});
    copies_.back().done.record(copy_stream_);
    return true;
  }

  // Lets the loader have the host buffers of copies that are done.
  void release_copied() {
    while (!copies_.empty() && copies_.front().handed_out && copies_.front().done.query()) copies_.pop_front();
  }

  BatchLoader& loader_;
  c10::Device device_;
  c10::impl::VirtualGuardImpl guard_impl_;
  c10::Stream copy_stream_;
  Normalizer normalize_;                    // its mean and std on the device once
  std::shared_ptr<DeviceDecoder> decoder_;  // with the loader's device_decode
  std::deque<Copy> copies_;                 // oldest first; the last one not handed out yet is the batch ahead
  bool epoch_ended_ = false;
};

}  // namespace

std::unique_ptr<DeviceFeed> make_device_feed(BatchLoader& loader, c10::Device device) {
  if (device.is_cpu()) return std::make_unique<HostFeed>(loader);
  return std::make_unique<StreamFeed>(loader, device);
}

}  // namespace ddp
