// PowerSgdHook: PyTorch's powerSGD_hook (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py) as a c10d
// Reducer communication hook, and PowerSgdState, what PowerSGDState keeps between steps.
//
// PowerSGD (Vogels et al., "PowerSGD: Practical Low-Rank Gradient Compression for Distributed Optimization",
// NeurIPS 2019) sends, for each gradient matrix M (n x m, a tensor viewed as [shape[0], -1]), the rank-r factors
// P = M Q (n x r) and Q = M^T P (m x r) instead of M, with the error M - P Q^T carried into the next step.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>

namespace ddp {

// PowerSGDState's settings (dist.powersgd_* keys).
struct PowerSgdOptions {
  int64_t matrix_approximation_rank = 1;
  int64_t start_iter = 1000;  // start_powerSGD_iter: all-reduces whole before this many synchronising backwards
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  uint32_t random_seed = 0;
  // P = M Q and Q = M^T P computed as their transposes on the CPU, and P Q^T in one pass with the residual
  bool transposed_products = false;
};

// _should_compress: whether an n x m matrix at this rank is sent as P and Q, by the element counts it compares.
struct CompressTest {
  bool compress = false;
  int64_t uncompressed = 0;  // n * m
  int64_t compressed = 0;    // (n + m) * rank
};
CompressTest should_compress(int64_t n, int64_t m, int64_t rank, double min_compression_rate);

// numpy.random.RandomState(seed).randint(1_000_000_000), the draw the hook seeds torch's generator with: MT19937
// seeded as numpy's legacy seeding seeds it (init_genrand), masked rejection as numpy's bounded integers draw.
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  int64_t randint_billion();
  std::mt19937& engine() { return mt_; }
  const std::mt19937& engine() const { return mt_; }

 private:
  std::mt19937 mt_;
};

// The state PowerSGDState keeps besides its settings and process group (its __getstate__ minus those): per bucket
// index the error-feedback residual and the P and Q memories, the iteration count, the generator and the counts of
// elements before and after compression.
struct PowerSgdState {
  explicit PowerSgdState(const PowerSgdOptions& o) : options(o), rng(o.random_seed) {}

  PowerSgdOptions options;
  NumpyRandomState rng;
  std::map<int64_t, at::Tensor> error;
  std::map<int64_t, at::Tensor> p_memory;
  std::map<int64_t, at::Tensor> q_memory;
  int64_t iter = 0;
  int64_t numel_before_compression = 0;
  int64_t numel_after_compression = 0;
  // Elements handed to all-reduces in the iteration under way and in the last one done.
  int64_t elements_this_iter = 0, elements_last_iter = 0;
  // While measure_residuals is set (a step's figures are logged), each bucket's decompression adds up the squares of
  // the residual it forms, per bucket index: the residuals' norm without a pass of its own. Emptied at each step's
  // start, so it holds the squares of the step under way only.
  bool measure_residuals = false;
  std::map<int64_t, double> residual_squares;
  mutable std::mutex mutex;  // buckets' callbacks run on the process group's threads
};

// After a step the optimizer skipped for inf/NaN gradients: drops the residuals and the P and Q memories the step left,
// so that every bucket's next compressed step runs as its first (no residual, random Qs from the state's generator,
// drawn alike on every rank). The step count, the generator and the element counts go on.
void powersgd_start_over(PowerSgdState& s);

// powerSGD_hook on one bucket: before options.start_iter the averaged all-reduce of _allreduce_fut; then
// error feedback, the uncompressed tensors' all-reduce, P's, then Q's, and the decompression into the bucket.
//
// The hook starts P's and Q's all-reduces from the callbacks of the one before, on whichever thread completed it;
// with several buckets in flight, the ranks then issue their collectives in different orders, which Gloo does not
// survive (torch 2.11's hook on Gloo with ResNet-18's buckets: "Received data size doesn't match expected size").
// Here a bucket's first all-reduce starts once the previous bucket's last is done, so every rank issues the same
// sequence; the numbers are the hook's (each all-reduce sums the same tensors), and backward goes on meanwhile.
class PowerSgdHook final : public c10d::CommHookInterface {
 public:
  PowerSgdHook(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<PowerSgdState> state);

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<PowerSgdState> state_;
  c10::intrusive_ptr<c10::ivalue::Future> tail_;  // the last bucket's result (runHook runs on one thread at a time)
};

// The checkpoint entry of a PowerSgdState: PowerSGDState.__getstate__'s fields but its settings (the config's; the
// rank and the compression rule are kept to say when a resumed run changes them), with every rank's error-feedback
// residuals, gathered by the caller into host tensors nothing else holds (errors[rank]: bucket index -> residual);
// the P and Q memories are copied (host_copy).
c10::impl::GenericDict powersgd_entry(const PowerSgdState& s, const std::vector<std::map<int64_t, at::Tensor>>& errors);

// Restores `s` from such an entry as `rank` of `world_size` on `device`. The residuals of a checkpoint written by
// another number of ranks are not this rank's: they start from zero; P and Q memories laid out by another rank or
// compression rule are drawn afresh where the hook finds them of another size. The line returned says what was reset
// ("" when nothing was).
std::string load_powersgd_entry(PowerSgdState& s, const c10::IValue& entry, int64_t rank, int64_t world_size,
                                const at::Device& device);

// _orthogonalize: the columns of each matrix of a [batch, n, r] tensor made orthonormal in place: Gram-Schmidt for
// r <= 2 or half precision (each column divided by its norm + epsilon), QR otherwise.
void orthogonalize(at::Tensor& matrices, double epsilon);

}  // namespace ddp
