// DeviceFeed: a BatchLoader's batches delivered on the training device, the next one's copy already under way.
#pragma once

#include "data/loader.h"

#include <memory>
#include <optional>

namespace ddp {

class DeviceFeed {
 public:
  virtual ~DeviceFeed() = default;
  // The next batch on the device, ready to use on the device's current stream; nullopt at the end.
  virtual std::optional<Batch> next() = 0;
};

// CPU: the loader's batches as they are. An accelerator (CUDA): each batch is copied with non_blocking on a side
// stream while the previous one is in use (DataLoader's pin_memory=True + .cuda(non_blocking=True), one batch ahead
// within an epoch); next() makes the current stream wait for that copy and records the tensors on it for the caching
// allocator, then normalises the images there when the loader left them uint8 (LoaderOptions::normalize), with mean
// and std made on the device once, and zeroes the rows' v2.RandomErasing boxes (Batch::erasures). A batch's host
// buffers are held until its copy is done: the loader reuses them. With the loader's device_decode, the rows it left
// for the device are decoded and transformed on the copy stream after the copy (DeviceDecoder), so the next batch's
// decoding also overlaps the step. Like the loader's, next() says nullopt at each epoch's end and then goes on into the
// loader's next epoch.
std::unique_ptr<DeviceFeed> make_device_feed(BatchLoader& loader, c10::Device device);

}  // namespace ddp
