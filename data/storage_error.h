// StorageError: a split's storage failing (a server, a link), not one sample being bad.
#pragma once

#include <stdexcept>

namespace ddp {

// Thrown where the place a split's samples come from fails as a whole: an HTTP server answering an error or nothing
// after its retries. data.on_bad_sample never skips it: the run stops with its line.
struct StorageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ddp
