// Md5 through OpenSSL's EVP interface (the digest libcrypto also gives base/sha256), and whole-file hashing.
#include "data/download/md5.h"

#include "base/digest.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace ddp {

Md5::Md5() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw std::runtime_error("MD5 is not available from OpenSSL");
  }
}

Md5::~Md5() { EVP_MD_CTX_free(ctx_); }

void Md5::update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx_, data, size) != 1) throw std::runtime_error("MD5 update failed");
}

std::string Md5::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &len) != 1) throw std::runtime_error("MD5 failed");
  return hex_text(digest, len);
}

std::string md5_hex(const std::string& bytes) {
  Md5 md5;
  md5.update(bytes.data(), bytes.size());
  return md5.hex_digest();
}

std::string md5_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open for reading: " + std::strerror(errno));
  Md5 md5;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    md5.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return md5.hex_digest();
}

}  // namespace ddp
