// TarShardReader: WebDataset tar shards through libarchive.
#include "data/tar_shard.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <stdexcept>

namespace ddp {
namespace {

// webdataset's base_plus_ext: (key, extension) of a member name; false when its last part has no dot.
bool base_plus_ext(const std::string& name, std::string& key, std::string& ext) {
  static const std::regex split(R"(^((?:.*/|)[^.]+)[.]([^/]*)$)");
  std::smatch m;
  if (!std::regex_match(name, m, split)) return false;
  key = m[1];
  ext = m[2];
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return true;
}

// webdataset's metadata members, which it passes over: "__name__" at the top, or a first part "__...__".
bool metadata(const std::string& name) {
  static const std::regex skip_meta(R"(^__[^/]*__($|/))");
  return std::regex_search(name, skip_meta);
}

// What a member's bytes are reserved up front at most: a header may claim any size, and the bytes read decide.
constexpr la_int64_t kMaxReserve = la_int64_t{1} << 24;

// Whether `name` is absolute or has a ".." part.
bool escapes(const std::string& name) {
  if (!name.empty() && name[0] == '/') return true;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = name.find('/', start);
    if (name.substr(start, end == std::string::npos ? std::string::npos : end - start) == "..") return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::string archive_why(struct archive* a, const char* otherwise) {
  const char* why = archive_error_string(a);
  return why ? why : otherwise;
}

const std::string* ShardSample::find(const std::string& ext) const {
  for (const auto& [e, bytes] : members)
    if (e == ext) return &bytes;
  return nullptr;
}

void support_shard_compression(struct archive* a) {
  // What Python's tarfile.open(mode="r|*") reads, and zstd: compression through libraries, never an external program
  // (libarchive's lrzip, grzip and lzop filters run one).
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_bzip2(a);
  archive_read_support_filter_xz(a);
  archive_read_support_filter_zstd(a);
}

void TarShardReader::start(const std::string& path_for_errors, bool compressed) {
  archive_ = archive_read_new();
  if (!archive_) throw std::runtime_error("shard " + path_for_errors + ": libarchive could not start a reader");
  if (compressed) support_shard_compression(archive_);
  archive_read_support_format_tar(archive_);
  archive_read_support_format_empty(archive_);
}

void TarShardReader::opened(int status) {
  if (status == ARCHIVE_OK) return;
  const std::string why = archive_why(archive_, "cannot open");
  archive_read_free(archive_);
  archive_ = nullptr;
  throw std::runtime_error("shard " + name_ + ": " + why);
}

TarShardReader::TarShardReader(const std::string& path, std::string name) : name_(std::move(name)) {
  start(name_, /*compressed=*/true);
  opened(archive_read_open_filename(archive_, path.c_str(), 1 << 20));
}

TarShardReader::TarShardReader(const void* data, size_t size, std::string name, bool compressed)
    : name_(std::move(name)) {
  start(name_, compressed);
  opened(archive_read_open_memory(archive_, data, size));
}

bool TarShardReader::compressed() const { return archive_filter_code(archive_, 0) != ARCHIVE_FILTER_NONE; }

TarShardReader::~TarShardReader() {
  if (archive_) archive_read_free(archive_);
}

void TarShardReader::fail(const std::string& what) const { throw std::runtime_error("shard " + name_ + ": " + what); }

bool TarShardReader::next_member(std::string& member_name, int64_t& offset) {
  while (true) {
    struct archive_entry* entry = nullptr;
    const int r = archive_read_next_header(archive_, &entry);
    // Where this entry's header blocks (its extended headers included) start in the decompressed stream.
    offset = archive_read_header_position(archive_);
    if (r == ARCHIVE_EOF) return false;
    if (r < ARCHIVE_WARN) fail(archive_why(archive_, "unreadable tar header"));
    const char* path = archive_entry_pathname(entry);
    member_name = path ? path : "";
    if (archive_entry_filetype(entry) != AE_IFREG || member_name.empty() || metadata(member_name)) continue;
    if (escapes(member_name))
      fail("member \"" + member_name +
           "\": an absolute name or one with a \"..\" part (ddptrain only reads members, and refuses such names)");
    entry_ = entry;
    return true;
  }
}

void TarShardReader::read_member(const std::string& member_name, std::string& bytes, int64_t room) {
  const la_int64_t size = archive_entry_size_is_set(entry_) ? archive_entry_size(entry_) : -1;
  const bool sparse = archive_entry_sparse_count(entry_) > 0;
  const auto too_big = [&](la_int64_t claimed) {
    fail("member \"" + member_name + "\": " + std::to_string(claimed) + " bytes, over the " +
         std::to_string(kMaxSampleBytes) + " ddptrain reads for one sample" +
         (room < kMaxSampleBytes ? " (its other members hold " + std::to_string(kMaxSampleBytes - room) + ")" : ""));
  };
  if (size > room) too_big(size);
  bytes.clear();
  if (size > 0) bytes.reserve(static_cast<size_t>(std::min(size, kMaxReserve)));
  // Block by block, as archive_read_data reads them: a sparse member's holes read as zeros, up to its full size,
  // which comes as the place of its end.
  while (true) {
    const void* block = nullptr;
    size_t length = 0;
    la_int64_t at = 0;
    const int got = archive_read_data_block(archive_, &block, &length, &at);
    if (got != ARCHIVE_OK && got != ARCHIVE_EOF)
      fail("member \"" + member_name + "\": " + archive_why(archive_, "unreadable data"));
    if (got == ARCHIVE_EOF && !sparse) break;
    const auto held = static_cast<la_int64_t>(bytes.size());
    if (sparse ? at < held : at != held)  // only a sparse member skips ahead (a hole)
      fail("member \"" + member_name + "\": its data blocks are out of order");
    if (at > room || static_cast<la_int64_t>(length) > room - at)
      too_big(at > room ? at : at + static_cast<la_int64_t>(std::min<size_t>(length, kMaxSampleBytes)));
    bytes.resize(static_cast<size_t>(at), '\0');
    if (length > 0) bytes.append(static_cast<const char*>(block), length);
    if (got == ARCHIVE_EOF) break;
  }
  // A header whose size is not what the stream holds: a truncated member, or a GNU header's real-size field on a
  // member that is not sparse (Python's tarfile reads that field for sparse members only).
  if (size >= 0 && static_cast<la_int64_t>(bytes.size()) != size)
    fail("member \"" + member_name + "\": its header says " + std::to_string(size) + " bytes, the shard holds " +
         std::to_string(bytes.size()));
}

std::optional<ShardSample> TarShardReader::next() {
  if (ended_) return std::nullopt;
  ShardSample sample;
  if (pending_) {
    sample.key = pending_->first;
    sample.offset = pending_offset_;
    sample.members.emplace_back(pending_->second, std::move(pending_bytes_));
    pending_.reset();
  }
  std::string member_name, bytes, key, ext;
  int64_t offset = 0, held = 0;
  for (const auto& member : sample.members) held += static_cast<int64_t>(member.second.size());
  while (next_member(member_name, offset)) {
    if (!base_plus_ext(member_name, key, ext)) continue;
    const bool next_sample = !sample.members.empty() && key != sample.key;
    read_member(member_name, bytes, kMaxSampleBytes - (next_sample ? 0 : held));
    if (next_sample) {
      pending_.emplace(key, ext);
      pending_bytes_ = std::move(bytes);
      pending_offset_ = offset;
      sample.length = offset - sample.offset;
      ++samples_;
      return sample;
    }
    if (sample.members.empty()) {
      sample.key = key;
      sample.offset = offset;
    }
    if (sample.find(ext)) fail("member \"" + member_name + "\": sample \"" + key + "\" has a second ." + ext);
    held += static_cast<int64_t>(bytes.size());
    sample.members.emplace_back(ext, std::move(bytes));
  }
  ended_ = true;
  sample.length = offset - sample.offset;
  if (sample.members.empty()) {
    if (samples_ == 0) fail("holds no sample");
    return std::nullopt;
  }
  ++samples_;
  return sample;
}

}  // namespace ddp
