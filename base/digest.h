// Digests as text: SHA-256 of a byte string (OpenSSL's libcrypto), and any digest's bytes as lowercase hex.
#pragma once

#include <cstddef>
#include <string>

namespace ddp {

// 64 hex digits.
std::string sha256_hex(const std::string& data);
// Two lowercase hex digits a byte, as hashlib's hexdigest() prints a digest.
std::string hex_text(const unsigned char* bytes, size_t size);

}  // namespace ddp
