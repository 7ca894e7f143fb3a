// libFuzzer target: read_idx (ISA-L streaming, the zlib fallback, header checks) on arbitrary bytes in a memfd.
#include "data/idx.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz-idx", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    ddp::read_idx(path);
  } catch (const std::runtime_error& e) {
    // read_idx's errors all start with the path: anything else escaping is a finding
    if (std::string(e.what()).rfind(path + ": ", 0) != 0) std::abort();
  }
  close(fd);
  return 0;
}
