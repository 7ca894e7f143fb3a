// Md5: incremental MD5 through OpenSSL, for checking downloaded files against torchvision's published digests.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

struct evp_md_ctx_st;

namespace ddp {

class Md5 {
 public:
  Md5();
  ~Md5();
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void update(const void* data, size_t size);
  // Lowercase hex digest, as hashlib's hexdigest(); the object must not be updated afterwards.
  std::string hex_digest();

 private:
  evp_md_ctx_st* ctx_;
};

// Hex MD5 of a whole string / of a file's bytes (throws std::runtime_error naming the file if unreadable).
std::string md5_hex(const std::string& bytes);
std::string md5_file_hex(const std::string& path);

}  // namespace ddp
