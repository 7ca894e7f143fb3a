// libFuzzer target: TarShardReader on arbitrary bytes (libarchive's tar reader and filters, the grouping into
// samples, the member checks), each sample's place read back alone, and decode_shard_index on the same bytes.
#include "data/shard_index.h"
#include "data/tar_shard.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    ddp::TarShardReader reader(data, size, "fuzz", /*compressed=*/true);
    for (int samples = 0; samples < 100000; ++samples) {
      const std::optional<ddp::ShardSample> sample = reader.next();
      if (!sample) break;
      // A sample's place lies inside the stream it came from, unless the stream was compressed.
      if (sample->offset < 0 || sample->length <= 0) std::abort();
      if (!reader.compressed() && static_cast<size_t>(sample->offset + sample->length) <= size) {
        ddp::TarShardReader alone(data + sample->offset, static_cast<size_t>(sample->length), "fuzz",
                                  /*compressed=*/false);
        const std::optional<ddp::ShardSample> again = alone.next();
        if (!again || again->key != sample->key || again->members != sample->members) std::abort();
      }
    }
  } catch (const std::runtime_error& e) {
    // The reader's errors all name the shard: anything else escaping is a finding.
    if (std::string(e.what()).rfind("shard fuzz: ", 0) != 0) std::abort();
  }
  try {
    const ddp::ShardIndex index = ddp::decode_shard_index(bytes, "fuzz.ddpidx");
    for (int64_t i = 0; i < index.size(); ++i) (void)index.key(i);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind("fuzz.ddpidx: ", 0) != 0) std::abort();
  }
  return 0;
}
