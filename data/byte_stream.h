// ByteStream: a file's bytes, gunzipped on the fly (ISA-L, every member, zero padding allowed) when it is gzip.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

struct inflate_state;

namespace ddp {

// Reads sequentially in 1 MiB chunks, so a large .gz never sits in memory next to its contents. Any problem (unreadable
// file, corrupt or truncated gzip, trailing garbage) only sets failed(): callers that need to say what is wrong read
// the file again with a strict reader.
class ByteStream {
 public:
  explicit ByteStream(const std::string& path);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Up to n bytes into dst; fewer only at the end of the data or on failure.
  size_t read(uint8_t* dst, size_t n);
  // Reads and counts whatever is left.
  size_t skip_rest();
  bool failed() const { return failed_; }
  // Whether the file is gzip (its first bytes are a gzip member's magic).
  bool gzip() const { return gzip_; }

 private:
  bool refill();
  size_t read_gzip(uint8_t* dst, size_t n);

  std::FILE* file_ = nullptr;
  bool gzip_ = false, failed_ = false, input_end_ = false, finished_ = false;
  std::vector<uint8_t> in_;
  size_t in_pos_ = 0, in_len_ = 0;
  std::unique_ptr<inflate_state> state_;
};

}  // namespace ddp
