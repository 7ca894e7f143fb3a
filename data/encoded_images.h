// EncodedImages: a split whose samples are encoded images (JPEG, PNG: files of a folder, members of tar shards),
// each decoded and transformed by the split's transform list when a batch is assembled.
#pragma once

#include "data/dataset.h"
#include "data/sample_transforms.h"

#include <atomic>
#include <string>
#include <type_traits>
#include <vector>

namespace ddp {

// Each sample's draws come from one generator keyed by the sample's seed. With data.on_bad_sample = "skip", a sample
// that cannot be read is replaced by the next readable one of the split (in the split's order, wrapping), the same on
// every run. A StorageError (the split's server failing) is never skipped.
class EncodedImages : public SampleSource {
 public:
  // `split`: how errors name the split (its folder, its shard patterns); `size`: its samples.
  EncodedImages(std::string split, int64_t size, const DataConfig& data, bool augment);

  Sample read(int64_t index, uint64_t seed) const override;
  // A JPEG nvJPEG can decode (cpu_decode_reason) is read, its transform drawn as read() draws it, when the device
  // applies every op of the list; otherwise every sample is read(): its ops run on the loader threads.
  Prepared prepare_for_device(int64_t index, uint64_t seed) const override;
  int64_t bad_samples() const override { return bad_.load(); }
  // The transform list, as the banner prints it.
  std::string describe() const { return transforms_.describe(); }

 protected:
  struct Encoded {
    std::string name;  // what errors name: the file, or the shard and key
    std::vector<uint8_t> bytes;
  };
  // Sample `index`'s image; throws std::runtime_error naming it when it cannot be read.
  virtual Encoded fetch(int64_t index) const = 0;

 private:
  // f(index) for sample `index`, or with data.on_bad_sample = "skip" for the first of the split from it (wrapping)
  // for which f does not throw, each failure counted.
  template <class F>
  std::invoke_result_t<const F&, int64_t> first_readable(int64_t index, const F& f) const;
  Sample load(const Encoded& image, uint64_t seed, int64_t index) const;

  std::string split_;
  int64_t size_;
  bool skip_bad_;
  SampleTransforms transforms_;
  mutable std::atomic<int64_t> bad_{0};
};

}  // namespace ddp
