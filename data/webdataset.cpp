// The webdataset dataset: training and evaluation splits of tar shards in WebDataset's layout (a sample's image its
// jpg, jpeg or png member, its class its cls member), each sample read at the place the shard's index gives
// (data/shard_index.h) from a local shard or an HTTP server (data/shard_source.h), and decoded and transformed as an
// image folder's; its row.
#include "data/dataset_kind.h"

#include "config/config.h"
#include "data/encoded_images.h"
#include "data/shard_index.h"
#include "data/shard_patterns.h"
#include "data/shard_runs.h"
#include "data/shard_source.h"
#include "data/shard_stream.h"
#include "data/storage_error.h"
#include "data/tar_shard.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

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
  int64_t first = 0;            // the split index of its first sample
  std::vector<int64_t> runs;    // a plain tar's: the first sample of each run read at once (ShardRuns)
  RangedShard ranged() const { return {path, index, runs}; }
};

// Whether a shard is read front to back (a pipe: command, a compressed shard, local or HTTP) instead of at each
// sample's place.
bool streamed(const Shard& shard) { return pipe_shard(shard.path) || shard.index.compressed; }

// The samples of shards read front to back: one stream open per shard being read, the samples it passed on the way
// to the one asked for kept until they are asked for (at most `keep` a shard, the lowest dropped first: asked for
// later, it is read again from the shard's start), at most `max_open` streams at once (the least recently used
// dropped). A stream that fails is started again, data.shard_retries times.
class StreamedShards {
 public:
  StreamedShards(ShardFetch fetch, size_t keep, size_t max_open) : fetch_(fetch), keep_(keep), max_open_(max_open) {}

  // Sample i's bytes of shard number s.
  std::string sample(size_t s, const Shard& shard, int64_t i) {
    const std::shared_ptr<Reading> r = reading(s);
    std::lock_guard<std::mutex> lock(r->mu);
    if (auto kept = r->kept.find(i); kept != r->kept.end()) {
      std::string bytes = std::move(kept->second);
      r->kept.erase(kept);
      return bytes;
    }
    std::string bytes;
    retry_storage(fetch_, [&] {
      try {
        bytes = advance(*r, shard, i);
      } catch (const StorageError&) {
        r->stream.reset();  // the next try starts the shard again
        throw;
      }
    });
    return bytes;
  }

 private:
  struct Reading {
    std::mutex mu;
    std::unique_ptr<ShardStream> stream;
    int64_t next = 0;  // the sample the stream is at
    std::map<int64_t, std::string> kept;
  };

  std::shared_ptr<Reading> reading(size_t s) {
    // Dropped after the lock is released: a reading's end may wait for its command.
    std::vector<std::shared_ptr<Reading>> dropped;
    std::lock_guard<std::mutex> lock(mu_);
    auto& [r, used] = open_[s];
    used = ++clock_;
    if (!r) r = std::make_shared<Reading>();
    std::shared_ptr<Reading> found = r;
    while (open_.size() > max_open_) {  // a thread reading a dropped shard keeps it until it is done
      auto oldest = std::min_element(open_.begin(), open_.end(),
                                     [](const auto& a, const auto& b) { return a.second.second < b.second.second; });
      dropped.push_back(std::move(oldest->second.first));
      open_.erase(oldest);
    }
    return found;
  }

  static std::string read_sample(ShardStream& stream, const ShardIndex& index, int64_t i) {
    stream.skip(index.offsets[static_cast<size_t>(i)] - stream.position());
    std::string bytes(static_cast<size_t>(index.lengths[static_cast<size_t>(i)]), '\0');
    stream.read(bytes.data(), bytes.size());
    return bytes;
  }

  std::string advance(Reading& r, const Shard& shard, int64_t i) const {
    const ShardIndex& index = shard.index;
    if (!r.stream || r.next > i) {  // from the start, passing over the samples before i
      r.stream = std::make_unique<ShardStream>(shard.path, index.compressed);
      r.next = i;
    }
    for (; r.next < i; ++r.next) {  // samples passed on the way to i, kept for their turn
      r.kept.emplace(r.next, read_sample(*r.stream, index, r.next));
      while (r.kept.size() > keep_) r.kept.erase(r.kept.begin());
    }
    std::string bytes = read_sample(*r.stream, index, i);
    r.next = i + 1;
    if (r.next == index.size()) {  // the end: how the stream ended is checked (a command's exit status)
      r.stream->finish();
      r.stream.reset();
    }
    return bytes;
  }

  ShardFetch fetch_;
  size_t keep_, max_open_;
  std::mutex mu_;
  std::map<size_t, std::pair<std::shared_ptr<Reading>, uint64_t>> open_;  // (reading, last use)
  uint64_t clock_ = 0;
};

// A split of shards, each sample read at its place (its bytes alone are a tar stream holding it): from its run of a
// plain tar, local or HTTP (ShardRuns), or from its shard's stream.
class ShardSamples : public EncodedImages {
 public:
  ShardSamples(const std::string& patterns, std::vector<Shard> shards, int64_t size, int64_t num_classes,
               const DataConfig& data, bool augment, ShardFetch fetch)
      : EncodedImages(patterns, size, data, augment),
        shards_(std::move(shards)),
        num_classes_(num_classes),
        streams_(std::make_unique<StreamedShards>(fetch, static_cast<size_t>(data.shuffle_buffer) + 256,
                                                  static_cast<size_t>(2 * data.shards_in_flight + 4))) {
    // Runs are read on a thread per shard in flight, as many ahead at once; each sample in the shuffle buffer may
    // hold a run open, and each shard in flight its run being read and the next.
    if (std::any_of(shards_.begin(), shards_.end(), [](const Shard& shard) { return !shard.runs.empty(); }))
      runs_ = std::make_unique<ShardRuns>(fetch, static_cast<size_t>(data.shards_in_flight),
                                          static_cast<size_t>(data.shards_in_flight),
                                          static_cast<size_t>(data.shuffle_buffer + 2 * data.shards_in_flight));
  }

  void coming(const int64_t* indices, size_t count) const override {
    if (!runs_) return;
    for (size_t k = 0; k < count; ++k) {
      const auto it = shard_of(indices[k]);
      if (!it->runs.empty())
        runs_->coming(static_cast<size_t>(it - shards_.begin()), it->ranged(), indices[k] - it->first);
    }
  }

 private:
  std::vector<Shard>::const_iterator shard_of(int64_t index) const {
    return std::upper_bound(shards_.begin(), shards_.end(), index,
                            [](int64_t i, const Shard& shard) { return i < shard.first; }) -
           1;
  }

  Encoded fetch(int64_t index) const override {
    const auto it = shard_of(index);
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
      const size_t s = static_cast<size_t>(it - shards_.begin());
      bytes = streamed(shard) ? streams_->sample(s, shard, i) : runs_->sample(s, shard.ranged(), i);
    } catch (const StorageError& e) {  // "shard URL: why": the key added
      throw StorageError(name + ": " + after_shard(e.what(), shard.path));
    } catch (const std::runtime_error& e) {  // a local shard's read failed
      throw std::runtime_error(name + ": " + after_shard(e.what(), shard.path));
    }
    const std::string again = " (index it again with ddptrain --index-shards)";
    std::optional<ShardSample> sample;
    try {
      TarShardReader reader(bytes.data(), bytes.size(), shard.path, /*compressed=*/false);
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
  std::unique_ptr<StreamedShards> streams_;
  std::unique_ptr<ShardRuns> runs_;  // when a shard is a plain tar
};

// The index of the shard `path` of the split `key`: beside a local file (checked against its size), fetched from beside
// a URL, or the output of a pipe: shard's index command.
ShardIndex shard_index(const std::string& path, const std::string& key, const ShardFetch& fetch) {
  if (!remote_shard(path)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      throw std::runtime_error("shard " + path + " (" + key + "): " + std::strerror(errno));
    return read_shard_index(path, static_cast<int64_t>(st.st_size));
  }
  std::string source, bytes;
  try {
    source = index_source(path);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(key + ": " + e.what());
  }
  try {
    bytes = http_shard(path) ? read_url(source, fetch) : read_command(source, fetch);
  } catch (const StorageError& e) {
    const std::string why = e.what();
    throw StorageError(why + " (" + key +
                       (why.find(": HTTP 404") != std::string::npos
                            ? ": a shard's index SHARD.ddpidx is read beside it; make it with ddptrain "
                              "--index-shards and serve it with the shard)"
                            : ")"));
  }
  return decode_shard_index(bytes, source);
}

// The indexes of `paths`, read on up to 16 threads at once where a shard is remote (an index over HTTP or from a
// command waits on its server); the error of the first shard (in pattern order) that has one.
std::vector<ShardIndex> shard_indexes(const std::vector<std::string>& paths, const std::string& key,
                                      const ShardFetch& fetch) {
  std::vector<ShardIndex> indexes(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t s = next++; s < paths.size(); s = next++) {
      try {
        indexes[s] = shard_index(paths[s], key, fetch);
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
  };
  // Local indexes are read on this thread alone: a disk answers at once, and every thread's allocations would stay.
  const bool remote = std::any_of(paths.begin(), paths.end(), [](const std::string& p) { return remote_shard(p); });
  std::vector<std::thread> threads;
  for (size_t t = 1; remote && t < std::min<size_t>(16, paths.size()); ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return indexes;
}

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
  std::vector<ShardIndex> indexes = shard_indexes(paths, key, fetch);
  for (size_t s = 0; s < paths.size(); ++s) {
    std::string& path = paths[s];
    ShardIndex& index = indexes[s];
    if (index.size() == 0) throw std::runtime_error("shard " + path + " (" + key + "): holds no sample");
    for (int64_t i = 0; i < index.size(); ++i) {
      const int64_t cls = index.classes[static_cast<size_t>(i)];
      const std::string problem = class_problem(cls, num_classes);
      if (!problem.empty() && data.on_bad_sample == OnBadSample::Error)
        throw std::runtime_error("shard " + path + ", sample \"" + std::string(index.key(i)) + "\": " + problem);
      labels.push_back(problem.empty() ? cls : 0);  // a bad sample is replaced when read (data.on_bad_sample)
    }
    sizes.push_back(index.size());
    Shard& shard = shards.emplace_back(Shard{std::move(path), std::move(index), total, {}});
    if (!streamed(shard)) shard.runs = range_runs(shard.index);
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

// The class names of the file data.class_names names, one a line; as many as model.num_classes, none empty.
std::vector<std::string> read_class_names(const std::string& file, int64_t num_classes) {
  std::ifstream in(file);
  if (!in) throw ConfigError("data.class_names: cannot read " + file + ": " + std::strerror(errno));
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty())
      throw ConfigError("data.class_names: " + file + ":" + std::to_string(names.size() + 1) +
                        ": an empty line (a class name a line, in label order)");
    names.push_back(std::move(line));
  }
  if (static_cast<int64_t>(names.size()) != num_classes)
    throw ConfigError("data.class_names: " + file + " names " + std::to_string(names.size()) +
                      " classes, model.num_classes = " + std::to_string(num_classes));
  return names;
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
  if (!data.class_names.empty()) ds.classes = read_class_names(data.class_names, model.num_classes);
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
