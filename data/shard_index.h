// ShardIndex: what a tar shard holds, written beside it (SHARD.ddpidx) so that no rank reads the shards to plan an
// epoch: its samples' keys, classes and places, and the shard's size when it was indexed.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

struct ShardSample;

struct ShardIndex {
  // A sample's class when its `cls` member is missing, or is not a decimal integer.
  static constexpr int64_t kNoClass = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kNotAnInteger = kNoClass + 1;

  int64_t shard_bytes = 0;                // the shard file's size when indexed
  bool compressed = false;                // gzip, bzip2, xz or zstd: places are in the decompressed stream
  std::vector<int64_t> offsets, lengths;  // ShardSample::offset, ::length
  std::vector<int64_t> classes;           // the `cls` member's integer, or kNoClass / kNotAnInteger
  std::vector<uint64_t> key_ends;         // sample i's key is keys[key_ends[i - 1], key_ends[i])
  std::string keys;

  int64_t size() const { return static_cast<int64_t>(offsets.size()); }
  std::string_view key(int64_t i) const;
  void add(const ShardSample& sample);
};

// The file beside `shard` that holds its index.
std::string shard_index_path(const std::string& shard);

// A `cls` member's class as webdataset's default decoder reads it (Python's int() of the text: ASCII blanks around
// an optional sign and decimal digits); kNotAnInteger for anything else.
int64_t parse_class(std::string_view text);

// Reads the local shard `path` whole (TarShardReader's errors, naming it as `name`) and indexes it.
ShardIndex index_shard(const std::string& path, const std::string& name);

// The index in its file format (little-endian): "DDPSHIX1", then u64 shard bytes, u64 flags (1: compressed), u64
// samples, u64 key bytes; per sample i64 offset, i64 length, i64 class, u64 key end; then the keys.
std::vector<char> encode_shard_index(const ShardIndex& index);
// Decodes `bytes` read from `file`; throws std::runtime_error naming the file for anything that is not such an index
// (a bad magic, sizes that disagree, places that overlap or are out of order).
ShardIndex decode_shard_index(std::string_view bytes, const std::string& file);

// The index file of `shard` read and decoded, checked against the shard's size now (`shard_bytes`, -1: unknown);
// throws naming the index file when it is missing ("index the shards with ddptrain --index-shards"), unreadable or
// stale.
ShardIndex read_shard_index(const std::string& shard, int64_t shard_bytes);

// Indexes the local shard `shard` and writes its index beside it, whole or not at all; its sample count.
int64_t write_file_index(const std::string& shard);

// Indexes each local shard of `shards` on up to `threads` threads and writes its index file beside it (whole or not at
// all), saying one line per shard and one for all through `say`; throws the first shard's error after the threads
// stop (the indexes written so far stay: each is its shard's).
void index_shard_files(const std::vector<std::string>& shards, int64_t threads,
                       const std::function<void(const std::string&)>& say);

}  // namespace ddp
