// MD5 (RFC 1321), incremental, for checking downloaded files against torchvision's published digests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp {

class Md5 {
 public:
  Md5();
  void update(const void* data, size_t size);
  // Lowercase hex digest, as hashlib's hexdigest(); the object must not be updated afterwards.
  std::string hex_digest();

 private:
  void process_block(const uint8_t* block);
  std::array<uint32_t, 4> state_;
  std::array<uint8_t, 64> buffer_{};
  uint64_t total_bytes_ = 0;
};

// Hex MD5 of a whole string / of a file's bytes (throws std::runtime_error naming the file if unreadable).
std::string md5_hex(const std::string& bytes);
std::string md5_file_hex(const std::string& path);

}  // namespace ddp
