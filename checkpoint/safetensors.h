// safetensors files (Hugging Face's pickle-free tensor format): reading with every header field checked before any
// tensor byte is read, and writing as safetensors.torch.save_file does.
#pragma once

#include "checkpoint/state_dict.h"

#include <cstdint>
#include <istream>
#include <map>
#include <string>

namespace ddp {

// The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N bytes of a
// JSON object mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets into
// what follows the header) and an optional "__metadata__" of string values, then the tensors' bytes, row-major,
// little-endian.
struct SafetensorsFile {
  NamedTensors tensors;  // in the order of their bytes in the file
  std::map<std::string, std::string> metadata;
};

// Headers above this are refused before they are read (safetensors' own limit is 100 MB; an image model's header
// is a few hundred KB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 16u << 20;

// Reads `path`. Throws std::runtime_error naming the file and the first fault: a file shorter than 8 bytes or than
// its header, a header over kMaxSafetensorsHeaderBytes, not a JSON object, nested deeper than the format's, a
// duplicate or empty name, an unknown dtype, a negative shape entry, more than 64 dimensions, offsets out of order,
// overlapping, leaving a gap or out of the file, a byte range that is not dtype size x elements, or bytes past the
// last tensor. Nothing larger than the file is allocated.
SafetensorsFile read_safetensors(const std::string& path);
// The same for `size` bytes of `in`, named `path` in errors.
SafetensorsFile read_safetensors(std::istream& in, uint64_t size, const std::string& path);

// Writes `tensors` (each made contiguous, copied to the CPU) with `metadata` to `path` atomically (a failure leaves
// any previous file as it was); the header padded with spaces to a multiple of 8 bytes, as safetensors does.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
// The same file added to `files`, replaced when they are committed.
void write_safetensors(AtomicFileSet& files, const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Whether `path` names a safetensors file: its extension is .safetensors, or its bytes start as the format does (an
// 8-byte length, then '{'), where a torch.save file starts with a zip or pickle signature.
bool is_safetensors_file(const std::string& path);

}  // namespace ddp
