// Zip central-directory bounds: every record's declared size checked against the archive before anything inflates.
#include "checkpoint/torch_save/zip_bounds.h"

#include "checkpoint/torch_save/pickle_reader.h"

#include <algorithm>
#include <cstring>

namespace ddp {
namespace {

constexpr uint32_t kEndOfCentralDir = 0x06054b50, kZip64Locator = 0x07064b50, kZip64EndOfCentralDir = 0x06064b50,
                   kCentralHeader = 0x02014b50;
constexpr size_t kEndOfCentralDirSize = 22, kZip64LocatorSize = 20, kZip64EndSize = 56, kCentralHeaderSize = 46,
                 kLocalHeaderSize = 30;

// Little-endian reads at offsets the caller has checked.
struct ZipBytes {
  const unsigned char* p;
  size_t size;
  uint64_t le(size_t at, int n) const {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= uint64_t{p[at + k]} << (8 * k);
    return v;
  }
  bool fits(uint64_t at, uint64_t n) const { return at <= size && n <= size - at; }
};

[[noreturn]] void zip_bounds_fail(const std::string& what) {
  throw TorchSaveFormatError("corrupt or truncated torch.save archive: " + what);
}

// The central directory's offset, size and entry count, from the (zip64) end-of-central-directory record.
void zip_directory(const ZipBytes& z, uint64_t* offset, uint64_t* bytes, uint64_t* entries) {
  if (z.size < kEndOfCentralDirSize) zip_bounds_fail("too short for an end-of-central-directory record");
  size_t eocd = z.size - kEndOfCentralDirSize;
  const size_t lowest = z.size > kEndOfCentralDirSize + 0xffff ? z.size - kEndOfCentralDirSize - 0xffff : 0;
  while (z.le(eocd, 4) != kEndOfCentralDir) {
    if (eocd == lowest) zip_bounds_fail("no end-of-central-directory record");
    --eocd;
  }
  *entries = z.le(eocd + 10, 2);
  *bytes = z.le(eocd + 12, 4);
  *offset = z.le(eocd + 16, 4);
  if (eocd >= kZip64LocatorSize && z.le(eocd - kZip64LocatorSize, 4) == kZip64Locator) {
    const uint64_t end64 = z.le(eocd - kZip64LocatorSize + 8, 8);
    if (!z.fits(end64, kZip64EndSize) || z.le(end64, 4) != kZip64EndOfCentralDir)
      zip_bounds_fail("zip64 end-of-central-directory record outside the file");
    *entries = z.le(end64 + 32, 8);
    *bytes = z.le(end64 + 40, 8);
    *offset = z.le(end64 + 48, 8);
  }
  if (!z.fits(*offset, *bytes)) zip_bounds_fail("central directory outside the file");
  if (*entries > *bytes / kCentralHeaderSize) zip_bounds_fail("more entries than the central directory can hold");
}

// The zip64 extra field's replacements for the 32-bit fields that are 0xffffffff, in their fixed order.
void zip64_sizes(const ZipBytes& z, size_t extra, size_t extra_len, uint64_t* uncompressed, uint64_t* compressed,
                 uint64_t* local) {
  for (size_t at = extra; at + 4 <= extra + extra_len;) {
    const uint64_t id = z.le(at, 2), len = z.le(at + 2, 2);
    if (at + 4 + len > extra + extra_len) zip_bounds_fail("extra field overruns its entry");
    if (id == 1) {
      size_t field = at + 4;
      for (uint64_t* v : {uncompressed, compressed, local}) {
        if (*v != 0xffffffffu) continue;
        if (field + 8 > at + 4 + len) zip_bounds_fail("short zip64 extra field");
        *v = z.le(field, 8);
        field += 8;
      }
    }
    at += 4 + len;
  }
}

}  // namespace

void check_zip_bounds(const char* bytes, size_t size) {
  const ZipBytes z{reinterpret_cast<const unsigned char*>(bytes), size};
  uint64_t offset = 0, dir_bytes = 0, entries = 0;
  zip_directory(z, &offset, &dir_bytes, &entries);
  uint64_t at = offset, declared = 0;
  const uint64_t end = offset + dir_bytes;
  for (uint64_t e = 0; e < entries; ++e) {
    if (at + kCentralHeaderSize > end || z.le(at, 4) != kCentralHeader)
      zip_bounds_fail("central directory entry " + std::to_string(e) + " is malformed");
    uint64_t compressed = z.le(at + 20, 4), uncompressed = z.le(at + 24, 4), local = z.le(at + 42, 4);
    const size_t name_len = z.le(at + 28, 2), extra_len = z.le(at + 30, 2), comment_len = z.le(at + 32, 2);
    const uint64_t next = at + kCentralHeaderSize + name_len + extra_len + comment_len;
    if (next > end) zip_bounds_fail("central directory entry " + std::to_string(e) + " overruns the directory");
    const std::string name(bytes + at + kCentralHeaderSize, std::min<size_t>(name_len, 200));
    zip64_sizes(z, at + kCentralHeaderSize + name_len, extra_len, &uncompressed, &compressed, &local);
    if (!z.fits(local, kLocalHeaderSize) || !z.fits(local + kLocalHeaderSize, compressed))
      zip_bounds_fail("record " + name + " lies outside the file");
    if (uncompressed > size || (declared += uncompressed) > size)
      throw TorchSaveFormatError("zip record " + name + " declares " + std::to_string(uncompressed) +
                                 " bytes; the records together would exceed the archive's " + std::to_string(size) +
                                 " bytes (a zip bomb?)");
    at = next;
  }
}

}  // namespace ddp
