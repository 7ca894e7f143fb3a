// Zip central-directory bounds: every record's declared size checked against the archive before anything inflates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp {

// Walks the central directory of the zip archive in bytes[0, size) (zip64 included) and throws
// TorchSaveFormatError unless every record lies inside the archive and the records' declared (uncompressed) sizes
// together fit in it: torch.save stores its records uncompressed, so an archive holding more than its own size is
// a zip bomb (or corrupt), and PyTorchStreamReader would allocate each declared size before checking it.
void check_zip_bounds(const char* bytes, size_t size);

}  // namespace ddp
