// TarShardReader: the samples of one WebDataset tar shard, read front to back with libarchive; its members grouped
// into samples by key as webdataset's tar_file_iterator and group_by_keys group them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct archive;
struct archive_entry;

namespace ddp {

// One sample: the run of consecutive members that share a key.
struct ShardSample {
  std::string key;  // the member name up to the first dot of its last path part ("train/n01440764_10026")
  // (extension after that dot, lowercased; the member's bytes) in the shard's order: "jpg", "cls", "seg.png", ...
  std::vector<std::pair<std::string, std::string>> members;
  // Where the sample lies in the shard's tar stream (decompressed): from the first header block of its first member
  // on, up to the next sample's or the end of the archive. Those bytes alone read as this sample (read_shard_sample).
  int64_t offset = 0, length = 0;
  // The bytes of the member with extension `ext`; null when the sample has none.
  const std::string* find(const std::string& ext) const;
};

// Lets the reader `a` read the compressions a shard may have: gzip, bzip2, xz and zstd, each through its library.
void support_shard_compression(struct archive* a);

// libarchive's message for the last failure of `a`, or `otherwise` when it has none.
std::string archive_why(struct archive* a, const char* otherwise);

class TarShardReader {
 public:
  // What one sample's members may hold together at most: a header, a sparse member's map or a compressed stream can
  // claim any size at all for a few bytes of shard.
  static constexpr int64_t kMaxSampleBytes = int64_t{1} << 28;

  // Opens the shard `path` (a local file: tar, plain or compressed with gzip, bzip2 or xz as Python's
  // tarfile.open(mode="r|*") reads them, or zstd). `name` is how errors name it (its pattern's URL). Throws naming it
  // when the file cannot be opened.
  TarShardReader(const std::string& path, std::string name);
  // Reads the tar stream held in memory at [data, data + size), e.g. one sample's bytes of a shard; compressed as the
  // file constructor reads it only when `compressed` (a plain reader starts faster: no filter probes the bytes).
  TarShardReader(const void* data, size_t size, std::string name, bool compressed);
  ~TarShardReader();
  TarShardReader(const TarShardReader&) = delete;
  TarShardReader& operator=(const TarShardReader&) = delete;

  // The next sample; nullopt after the last. As webdataset does, members that are not regular files, names without
  // a dot in their last part and metadata ("__name__" at the top, or a first part "__...__") are passed over.
  // Throws std::runtime_error, one line naming the shard (and the member where one is at fault), for: a tar that is
  // truncated or malformed, a member holding fewer bytes than its header claims, a member name that is absolute or
  // has a ".." part (ddptrain never writes a member anywhere, and refuses names that would point outside the shard),
  // two members of one sample with the same extension, a sample whose members hold over kMaxSampleBytes together (a
  // sparse member's holes counted: they read as zeros), and a shard that holds no sample.
  std::optional<ShardSample> next();

  const std::string& name() const { return name_; }
  // Whether the shard is compressed (its samples' places are then in the decompressed stream).
  bool compressed() const;
  int64_t samples_read() const { return samples_; }

 private:
  // The header of the next member kept (its name, where its header blocks start); false at the end of the archive,
  // `offset` then where the end lies.
  bool next_member(std::string& member_name, int64_t& offset);
  // The bytes of the member whose header next_member() read last, at most `room` of them.
  void read_member(const std::string& member_name, std::string& bytes, int64_t room);
  // archive_read_new with what a shard may be: tar, plain or (`compressed`) compressed.
  void start(const std::string& path_for_errors, bool compressed);
  void opened(int status);
  [[noreturn]] void fail(const std::string& what) const;

  std::string name_;
  struct archive* archive_ = nullptr;
  struct archive_entry* entry_ = nullptr;                       // libarchive's, valid until the next header is read
  std::optional<std::pair<std::string, std::string>> pending_;  // (key, extension) of a member read ahead
  std::string pending_bytes_;
  int64_t pending_offset_ = 0;
  bool ended_ = false;
  int64_t samples_ = 0;
};

}  // namespace ddp
