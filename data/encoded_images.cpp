// EncodedImages: decoding and transforming encoded samples, on the loader threads or left for the device.
#include "data/encoded_images.h"

#include "data/image_decode.h"
#include "data/jpeg_header.h"
#include "data/storage_error.h"

#include <memory>
#include <stdexcept>

namespace ddp {

EncodedImages::EncodedImages(std::string split, int64_t size, const DataConfig& data, bool augment)
    : split_(std::move(split)),
      size_(size),
      skip_bad_(data.on_bad_sample == OnBadSample::Skip),
      transforms_(data, augment) {}

template <class F>
std::invoke_result_t<const F&, int64_t> EncodedImages::first_readable(int64_t index, const F& f) const {
  for (int64_t tries = 0; tries < size_; ++tries) {
    const int64_t i = (index + tries) % size_;
    try {
      return f(i);
    } catch (const StorageError&) {
      throw;  // the split's storage, not this sample: nothing to skip to
    } catch (const std::exception&) {
      if (!skip_bad_) throw;
      bad_.fetch_add(1);
    }
  }
  throw std::runtime_error(split_ + ": no image of the split can be read (data.on_bad_sample = \"skip\")");
}

SampleSource::Sample EncodedImages::load(const Encoded& image, uint64_t seed, int64_t index) const {
  TransformedSample t = transforms_(image.name, image.bytes, seed);
  return Sample{std::move(t.image), index, t.erase};
}

SampleSource::Sample EncodedImages::read(int64_t index, uint64_t seed) const {
  return first_readable(index, [&](int64_t i) { return load(fetch(i), seed, i); });
}

SampleSource::Prepared EncodedImages::prepare_for_device(int64_t index, uint64_t seed) const {
  if (!transforms_.runs_on_device()) return Prepared{read(index, seed), nullptr};
  return first_readable(index, [&](int64_t i) {
    Encoded image = fetch(i);
    if (!cpu_decode_reason(image.bytes.data(), image.bytes.size(), transforms_.decode_options().max_pixels).empty())
      return Prepared{load(image, seed, i), nullptr};
    const JpegFrame frame = *parse_jpeg_frame(image.bytes.data(), image.bytes.size());
    DeviceDraw draw = transforms_.draw_for_device(frame.height, frame.width, seed);
    auto e = std::make_shared<EncodedSample>();
    e->path = std::move(image.name);
    e->index = i;
    e->seed = seed;
    e->height = frame.height;
    e->width = frame.width;
    e->transform = draw.transform;
    e->bytes = std::move(image.bytes);
    return Prepared{Sample{torch::Tensor(), i, draw.erase}, std::move(e)};
  });
}

}  // namespace ddp
