// SkipZeroGradientsHook: a DDP communication hook that all-reduces only the gradient elements some rank can have
// non-zero (dist.skip_zero_gradients), with the same result as all-reducing every element.
//
// Gradients that are exactly zero on every rank at every step add nothing to the sum, yet cost their bytes on the
// wire: ResNet-18 on 28x28 images with model.skip_padding_taps leaves 8 of the 9 taps of layer4's 3x3 kernels
// without gradient, 62% of all gradient bytes. Per bucket the hook learns from a whole all-reduce the positions
// where any rank's gradient is not zero (a second all-reduce, MAX over a byte per element), and from then on sends
// only those (gathered into one tensor) plus one flag: whether this rank has a gradient other than zero anywhere
// else. When every flag is clear, the positions left out are zero on every rank, so their sum is zero as well (+0
// here; -0 from a whole all-reduce only where every rank had -0) and the gathered sum is the whole result;
// otherwise, once backward has computed every gradient and before the Reducer finishes, on the thread that ran
// backward and in bucket order, every rank (each sees the same flags) learns where any rank has a non-zero (the MAX
// all-reduce again) and all-reduces the values at those new positions, which join the others. A bucket that needs
// this for more than half of its gathered all-reduces (judged after eight) is all-reduced whole from then on.
//
// Averaging and compression are those of PyTorch's built-in hooks: gradients divided by the world size before the
// sum (allreduce_hook), or cast to float16 or bfloat16 and then divided (fp16_compress_hook, bf16_compress_hook); for
// two ranks the result is bit for bit that of all-reducing the whole bucket, but for the sign of those zeros. CPU
// gradients only.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace ddp {

// Counts since the hook was made, for the run's summary and for tests.
struct SkipZeroStats {
  int64_t elements = 0;          // gradient elements the buckets held, summed over all-reduces
  int64_t elements_sent = 0;     // of those, sent (whole buckets count in full)
  int64_t gathered_buckets = 0;  // all-reduces of gathered positions
  int64_t whole_buckets = 0;     // all-reduces of whole buckets
  int64_t repeats = 0;           // gathered all-reduces after which a flag was set: new positions learnt and sent
};

class SkipZeroGradientsHook : public c10d::CommHookInterface {
 public:
  // compress_to: the dtype buckets are sent in (float16, bfloat16); none: as they are.
  SkipZeroGradientsHook(c10::intrusive_ptr<c10d::ProcessGroup> group, std::optional<at::ScalarType> compress_to);
  ~SkipZeroGradientsHook() override;

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

  SkipZeroStats stats() const;

 private:
  struct Live;
  struct Pending;
  void finish_backward();
  void repeat(Pending& p);
  // MAX over ranks of a presence byte per element, started.
  c10::intrusive_ptr<c10d::Work> any_rank(at::Tensor& presence);

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::optional<at::ScalarType> compress_to_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Live>> live_;  // per bucket index; null: all-reduce the whole bucket
  std::vector<std::pair<int, int>> counts_;        // per bucket index: gathered all-reduces, repeats among them
  std::vector<std::vector<const void*>> layouts_;  // per bucket index: its parameters, in order
  std::vector<Pending> pending_;                   // this backward's all-reduces, in bucket order
  SkipZeroStats stats_;
};

}  // namespace ddp
