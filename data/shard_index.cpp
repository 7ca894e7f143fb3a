// ShardIndex: indexing a shard, and the index file's format.
#include "data/shard_index.h"

#include "base/atomic_file.h"
#include "data/shard_patterns.h"
#include "data/tar_shard.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ddp {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'S', 'H', 'I', 'X', '1'};
constexpr uint64_t kCompressedFlag = 1;
constexpr size_t kHeaderBytes = 8 + 4 * 8, kRecordBytes = 4 * 8;

void put(std::vector<char>& out, uint64_t v) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

uint64_t get(std::string_view bytes, size_t at) {
  uint64_t v = 0;
  for (int b = 0; b < 8; ++b) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + b])) << (8 * b);
  return v;
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

std::string_view ShardIndex::key(int64_t i) const {
  const uint64_t begin = i == 0 ? 0 : key_ends[static_cast<size_t>(i - 1)];
  return std::string_view(keys).substr(begin, key_ends[static_cast<size_t>(i)] - begin);
}

void ShardIndex::add(const ShardSample& sample) {
  offsets.push_back(sample.offset);
  lengths.push_back(sample.length);
  const std::string* cls = sample.find("cls");
  classes.push_back(cls ? parse_class(*cls) : kNoClass);
  keys += sample.key;
  key_ends.push_back(keys.size());
}

std::string shard_index_path(const std::string& shard) { return shard + ".ddpidx"; }

int64_t parse_class(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && blank(text[begin])) ++begin;
  while (end > begin && blank(text[end - 1])) --end;
  bool negative = false;
  if (begin < end && (text[begin] == '+' || text[begin] == '-')) negative = text[begin++] == '-';
  if (begin == end) return ShardIndex::kNotAnInteger;
  int64_t value = 0;
  for (size_t i = begin; i < end; ++i) {
    if (text[i] < '0' || text[i] > '9') return ShardIndex::kNotAnInteger;
    if (value > (std::numeric_limits<int64_t>::max() - (text[i] - '0')) / 10) return ShardIndex::kNotAnInteger;
    value = value * 10 + (text[i] - '0');
  }
  return negative ? -value : value;
}

ShardIndex index_shard(const std::string& path, const std::string& name) {
  ShardIndex index;
  TarShardReader reader(path, name);
  while (auto sample = reader.next()) index.add(*sample);
  index.compressed = reader.compressed();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  index.shard_bytes = static_cast<int64_t>(in.tellg());
  return index;
}

std::vector<char> encode_shard_index(const ShardIndex& index) {
  std::vector<char> out(kMagic, kMagic + 8);
  out.reserve(kHeaderBytes + kRecordBytes * index.offsets.size() + index.keys.size());
  put(out, static_cast<uint64_t>(index.shard_bytes));
  put(out, index.compressed ? kCompressedFlag : 0);
  put(out, static_cast<uint64_t>(index.size()));
  put(out, index.keys.size());
  for (int64_t i = 0; i < index.size(); ++i) {
    const auto s = static_cast<size_t>(i);
    put(out, static_cast<uint64_t>(index.offsets[s]));
    put(out, static_cast<uint64_t>(index.lengths[s]));
    put(out, static_cast<uint64_t>(index.classes[s]));
    put(out, index.key_ends[s]);
  }
  out.insert(out.end(), index.keys.begin(), index.keys.end());
  return out;
}

ShardIndex decode_shard_index(std::string_view bytes, const std::string& file) {
  const auto bad = [&](const std::string& why) {
    return std::runtime_error(file + ": not a ddptrain shard index (" + why +
                              "); index the shard again with ddptrain --index-shards");
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) throw bad("no DDPSHIX1 header");
  ShardIndex index;
  index.shard_bytes = static_cast<int64_t>(get(bytes, 8));
  const uint64_t flags = get(bytes, 16), samples = get(bytes, 24), key_bytes = get(bytes, 32);
  if (flags & ~kCompressedFlag) throw bad("unknown flags");
  index.compressed = flags & kCompressedFlag;
  const uint64_t room = bytes.size() - kHeaderBytes;
  if (samples > room / kRecordBytes || key_bytes != room - samples * kRecordBytes)
    throw bad(std::to_string(samples) + " samples and " + std::to_string(key_bytes) + " key bytes in " +
              std::to_string(bytes.size()) + " bytes");
  const auto n = static_cast<size_t>(samples);
  index.offsets.resize(n);
  index.lengths.resize(n);
  index.classes.resize(n);
  index.key_ends.resize(n);
  int64_t end = 0;
  uint64_t key_end = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = kHeaderBytes + i * kRecordBytes;
    const auto offset = static_cast<int64_t>(get(bytes, at)), length = static_cast<int64_t>(get(bytes, at + 8));
    index.classes[i] = static_cast<int64_t>(get(bytes, at + 16));
    const uint64_t k = get(bytes, at + 24);
    if (offset < end || length <= 0 || length > std::numeric_limits<int64_t>::max() - offset)
      throw bad("sample " + std::to_string(i) + "'s place " + std::to_string(offset) + "+" + std::to_string(length) +
                " overlaps the one before or is empty");
    if (!index.compressed && offset + length > index.shard_bytes)
      throw bad("sample " + std::to_string(i) + "'s place " + std::to_string(offset) + "+" + std::to_string(length) +
                " ends past the shard's " + std::to_string(index.shard_bytes) + " bytes");
    if (k <= key_end || k > key_bytes) throw bad("sample " + std::to_string(i) + "'s key is empty or out of range");
    end = offset + length;
    key_end = k;
    index.offsets[i] = offset;
    index.lengths[i] = length;
    index.key_ends[i] = k;
  }
  if (key_end != key_bytes) throw bad("key bytes left over");
  index.keys.assign(bytes.substr(kHeaderBytes + n * kRecordBytes));
  return index;
}

ShardIndex read_shard_index(const std::string& shard, int64_t shard_bytes) {
  const std::string file = shard_index_path(shard);
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw std::runtime_error(file + ": no index beside shard " + shard +
                             " (index the shards with ddptrain --index-shards PATTERN)");
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw std::runtime_error(file + ": unreadable");
  ShardIndex index = decode_shard_index(text.str(), file);
  if (shard_bytes >= 0 && shard_bytes != index.shard_bytes)
    throw std::runtime_error(file + ": indexes a shard of " + std::to_string(index.shard_bytes) + " bytes, " + shard +
                             " has " + std::to_string(shard_bytes) +
                             " (changed since it was indexed: index it again with ddptrain --index-shards)");
  return index;
}

int64_t write_file_index(const std::string& shard) {
  const ShardIndex index = index_shard(shard, shard);
  write_file_atomic(shard_index_path(shard), encode_shard_index(index));
  return index.size();
}

void index_shard_files(const std::vector<std::string>& shards, int64_t threads,
                       const std::function<void(const std::string&)>& say) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  int64_t samples = 0;
  const auto work = [&] {
    for (size_t s = next++; s < shards.size(); s = next++) {
      try {
        if (remote_shard(shards[s]))
          throw std::runtime_error("shard " + shards[s] + ": --index-shards indexes local shards only");
        const int64_t n = write_file_index(shards[s]);
        std::lock_guard<std::mutex> lock(mu);
        samples += n;
        say(shard_index_path(shards[s]) + ": " + std::to_string(n) + " samples");
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        next = shards.size();
      }
    }
  };
  std::vector<std::thread> pool;
  const auto n = static_cast<size_t>(std::clamp<int64_t>(threads, 1, static_cast<int64_t>(shards.size())));
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  say("indexed " + std::to_string(shards.size()) + " shard(s), " + std::to_string(samples) + " samples");
}

}  // namespace ddp
