// Epoch length arithmetic: quotients rounded up without n + b - 1, which overflows for sizes near 2^63.
#include "data/epoch_position.h"

namespace ddp {

int64_t batches_in(int64_t samples_per_rank, int64_t batch_size, bool drop_last) {
  const int64_t n = samples_per_rank, b = batch_size;
  return n / b + (!drop_last && n % b != 0 ? 1 : 0);
}

int64_t steps_in(int64_t batches, int64_t grad_accum_steps) {
  const int64_t k = grad_accum_steps;
  return batches / k + (batches % k != 0 ? 1 : 0);
}

}  // namespace ddp
