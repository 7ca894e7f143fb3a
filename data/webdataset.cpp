// The webdataset dataset: training and evaluation splits of tar shards in WebDataset's layout (a sample's image its
// jpg, jpeg or png member, its class its cls member), each sample read at the place the shard's index gives
// (data/shard_index.h) from a local shard or an HTTP server (data/shard_source.h), and decoded and transformed as an
// image folder's; its row.
#include "data/dataset_kind.h"

#include "config/config.h"
#include "data/encoded_images.h"
#include "data/shard_index.h"
#include "data/shard_patterns.h"
#include "data/shard_source.h"
#include "data/storage_error.h"
#include "data/tar_shard.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddp {
namespace {

// The members that hold a sample's image, in the order they are looked for (webdataset's to_tuple("jpg;jpeg;png")).
const char* const kImageExtensions[] = {"jpg", "jpeg", "png"};

// What is wrong with a sample's class, or "" when it is one of the model's `num_classes`.
std::string class_problem(int64_t cls, int64_t num_classes) {
  if (cls == ShardIndex::kNoClass) return "no cls member (a sample's class is its .cls member, a decimal integer)";
  if (cls == ShardIndex::kNotAnInteger) return "its cls member is not a decimal integer";
  if (cls < 0 || cls >= num_classes)
    return "class " + std::to_string(cls) + " is outside [0, " + std::to_string(num_classes) +
           ") (model.num_classes = " + std::to_string(num_classes) + ")";
  return "";
}

// An error's text without its "shard PATH: " opening.
std::string after_shard(const std::string& why, const std::string& path) {
  const std::string prefix = "shard " + path + ": ";
  return why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why;
}

struct Shard {
  std::string path;
  ShardIndex index;
  int64_t first = 0;  // the split index of its first sample
};

// A split of shards, each sample read at its place: its bytes alone are a tar stream holding it.
class ShardSamples : public EncodedImages {
 public:
  ShardSamples(const std::string& patterns, std::vector<Shard> shards, int64_t size, int64_t num_classes,
               const DataConfig& data, bool augment, ShardFetch fetch)
      : EncodedImages(patterns, size, data, augment),
        shards_(std::move(shards)),
        num_classes_(num_classes),
        fetch_(fetch) {}

 private:
  Encoded fetch(int64_t index) const override {
    const auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                                     [](int64_t i, const Shard& shard) { return i < shard.first; }) -
                    1;
    const Shard& shard = *it;
    const int64_t i = index - shard.first;
    const std::string key(shard.index.key(i));
    const std::string name = "shard " + shard.path + ", sample \"" + key + "\"";
    if (const std::string problem = class_problem(shard.index.classes[static_cast<size_t>(i)], num_classes_);
        !problem.empty())
      throw std::runtime_error(name + ": " + problem);
    const int64_t offset = shard.index.offsets[static_cast<size_t>(i)];
    std::string bytes;
    try {
      bytes = read_shard_bytes(shard.path, offset, shard.index.lengths[static_cast<size_t>(i)], shard.index.shard_bytes,
                               fetch_);
    } catch (const StorageError& e) {  // "shard URL: why": the key added
      throw StorageError(name + ": " + after_shard(e.what(), shard.path));
    }
    const std::string again = " (index it again with ddptrain --index-shards)";
    std::optional<ShardSample> sample;
    try {
      TarShardReader reader(bytes.data(), bytes.size(), shard.path);
      sample = reader.next();
    } catch (const std::runtime_error& e) {  // "shard PATH: why": the sample's bytes are no tar member
      throw std::runtime_error(name + ": unreadable at byte " + std::to_string(offset) +
                               ", where its index places it: " + after_shard(e.what(), shard.path) + again);
    }
    if (!sample || sample->key != key)
      throw std::runtime_error("shard " + shard.path + ": its index says sample \"" + key + "\" starts at byte " +
                               std::to_string(offset) + ", the shard holds " +
                               (sample ? "\"" + sample->key + "\"" : std::string("no sample")) + " there" + again);
    for (const char* ext : kImageExtensions)
      if (const std::string* image = sample->find(ext))
        return {name, std::vector<uint8_t>(image->begin(), image->end())};
    throw std::runtime_error(name + ": no jpg, jpeg or png member (the images ddptrain decodes)");
  }

  std::vector<Shard> shards_;
  int64_t num_classes_;
  ShardFetch fetch_;
};

// The split `key` names (data.train_shards or data.val_shards): each shard's index read and checked against the
// shard, the labels from them.
Split shard_split(const std::string& patterns, const std::string& key, const DataConfig& data, int64_t num_classes,
                  bool augment) {
  std::vector<std::string> paths;
  try {
    paths = expand_shard_patterns(patterns);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(key + ": " + e.what());
  }
  std::vector<Shard> shards;
  shards.reserve(paths.size());
  std::vector<int64_t> labels, sizes;
  int64_t total = 0;
  const ShardFetch fetch{data.shard_retries};
  for (std::string& path : paths) {
    if (remote_shard(path) && !http_shard(path))
      throw ConfigError(key + ": shard " + path +
                        ": data.dataset = \"webdataset\" reads local files and http:// or https:// URLs, not pipe: "
                        "commands (copy the shards to a local disk or serve them over HTTP)");
    ShardIndex index;
    if (http_shard(path)) {
      const std::string url = shard_index_path(path);
      std::string bytes;
      try {
        bytes = read_url(url, fetch);
      } catch (const StorageError& e) {
        const std::string why = e.what();
        throw StorageError(why + " (" + key +
                           (why.find(": HTTP 404") != std::string::npos
                                ? ": a shard's index SHARD.ddpidx is read beside it; make it with ddptrain "
                                  "--index-shards and serve it with the shard)"
                                : ")"));
      }
      index = decode_shard_index(bytes, url);
    } else {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0)
        throw std::runtime_error("shard " + path + " (" + key + "): " + std::strerror(errno));
      index = read_shard_index(path, static_cast<int64_t>(st.st_size));
    }
    if (index.compressed)
      throw std::runtime_error("shard " + path + " (" + key +
                               "): compressed; data.dataset = \"webdataset\" reads each sample at its place in an "
                               "uncompressed tar (store the shards as plain .tar)");
    if (index.size() == 0) throw std::runtime_error("shard " + path + " (" + key + "): holds no sample");
    for (int64_t i = 0; i < index.size(); ++i) {
      const int64_t cls = index.classes[static_cast<size_t>(i)];
      const std::string problem = class_problem(cls, num_classes);
      if (!problem.empty() && data.on_bad_sample == OnBadSample::Error)
        throw std::runtime_error("shard " + path + ", sample \"" + std::string(index.key(i)) + "\": " + problem);
      labels.push_back(problem.empty() ? cls : 0);  // a bad sample is replaced when read (data.on_bad_sample)
    }
    sizes.push_back(index.size());
    shards.push_back({std::move(path), std::move(index), total});
    total += sizes.back();
  }
  Split split;
  split.labels = torch::tensor(labels, torch::kInt64);
  split.shard_sizes = std::move(sizes);
  auto source = std::make_shared<ShardSamples>(patterns, std::move(shards), total, num_classes, data, augment, fetch);
  split.transforms = source->describe();
  split.source = std::move(source);
  return split;
}

}  // namespace

Dataset load_webdataset(const DataConfig& data, const ModelConfig& model) {
  Dataset ds;
  ds.name = "webdataset";
  ds.train =
      shard_split(data.train_shards, "data.train_shards", data, model.num_classes, data.augment == Augment::Standard);
  ds.test = shard_split(data.val_shards, "data.val_shards", data, model.num_classes, /*augment=*/false);
  ds.channels = 3;
  ds.image_size = data.augment == Augment::Standard ? data.train_crop_size : data.val_crop_size;
  ds.num_classes = model.num_classes;
  return ds;
}

// WebDataset's layout with ImageNet's Normalize values and crop sizes, as image_folder; the classes are
// model.num_classes (a shard holds no class names).
const DatasetKind& webdataset_dataset() {
  static const DatasetKind kind{
      {"webdataset",
       "tar shards in WebDataset's layout: a jpg/png and a cls member per sample (data.train_shards)",
       "",
       {0.485, 0.456, 0.406},
       {0.229, 0.224, 0.225},
       /*channels=*/3,
       /*image_size=*/224,
       /*any_image_size=*/true,
       /*num_classes=*/0,
       /*download=*/false,
       /*class_folders=*/false,
       /*image_files=*/true,
       /*shards=*/true},
      [](const DataConfig& data, const ModelConfig& model, int64_t, const DownloadNote&) {
        return load_webdataset(data, model);
      }};
  return kind;
}

}  // namespace ddp
