// ShardWriter and make_shards: tar shards in WebDataset's layout written through libarchive, a new shard past a
// size, each with its index beside it; an image folder or CIFAR-10 packed into them (ddptrain --make-shards).
#pragma once

#include "config/config.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

struct archive;

namespace ddp {

class ShardWriter {
 public:
  // Shards PREFIX-000000.tar, PREFIX-000001.tar, ...; a shard is closed once it holds `max_bytes` or more (a sample
  // is never split between shards).
  ShardWriter(std::string prefix, int64_t max_bytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Adds a sample: its members KEY.EXT with their bytes, in order. As webdataset's TarWriter writes them: regular
  // files of mode 0444, owner and group "bigdata"; the time 0, so the same samples give the same bytes.
  void write(const std::string& key, const std::vector<std::pair<std::string, std::string>>& members);
  // Closes the last shard. Each shard is written under a temporary name, renamed when whole, then indexed
  // (SHARD.ddpidx). Returns the shards' paths.
  std::vector<std::string> finish();

 private:
  void open_next();
  void close_current();

  std::string prefix_;
  int64_t max_bytes_;
  struct archive* archive_ = nullptr;
  std::string current_, temporary_;
  int64_t bytes_ = 0;
  std::vector<std::string> shards_;
};

// Packs the training and evaluation splits of the config's dataset (image_folder: each file as it is, which must be
// a JPEG or PNG; cifar10: each image as a PNG) into OUT_DIR/train-NNNNNN.tar and OUT_DIR/val-NNNNNN.tar of about
// `shard_bytes` each, in the dataset's order, a sample's key "CLASS/INDEX" (image_folder: CLASS/INDEX_STEM) and its
// class in `cls`; for an image folder its class names too, one a line in label order, in OUT_DIR/classes.txt
// (data.class_names). Says a line per split (its shards as a data.*_shards pattern) and one for the classes through
// `say`. Throws naming a file it cannot read or write.
void make_shards(const Config& cfg, const std::string& out_dir, int64_t shard_bytes,
                 const std::function<void(const std::string&)>& say);

}  // namespace ddp
