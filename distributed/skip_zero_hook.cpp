// SkipZeroGradientsHook: gathering the live positions of a bucket, their all-reduce, and learning new positions.
#include "distributed/skip_zero_hook.h"

#include <torch/csrc/autograd/engine.h>

#include <algorithm>
#include <cstring>

namespace ddp {
namespace {

// A gathered all-reduce after which a rank had non-zeros elsewhere costs a byte per element more and two more
// round trips: once more than half of a bucket's (after its first eight) did, its zeros move from step to step and
// it is sent whole.
constexpr int kGatheredBeforeJudging = 8;

bool worth_gathering(const std::pair<int, int>& gathered_and_repeats) {
  const auto [gathered, repeats] = gathered_and_repeats;
  return gathered < kGatheredBeforeJudging || 2 * repeats <= gathered;
}

// The bit patterns of a bucket's elements, as unsigned integers of the element's size.
template <typename F>
auto with_bits(const at::Tensor& t, F&& f) {
  const auto size = t.element_size();
  if (size == 2) return f(uint16_t{});
  if (size == 8) return f(uint64_t{});
  TORCH_CHECK(size == 4, "dist.skip_zero_gradients: gradients of ", size, "-byte elements");
  return f(uint32_t{});
}

// Every bit of a floating-point element but its sign: zero for +0 and -0.
template <typename Bits>
constexpr Bits kMagnitude = static_cast<Bits>(~Bits{0} >> 1);

// A byte per element of a bucket: 1 where it is not zero (+0 and -0 are zero).
at::Tensor presence_of(const at::Tensor& t) {
  return with_bits(t, [&](auto bits) {
    using Bits = decltype(bits);
    const at::ScalarType as = sizeof(Bits) == 2 ? at::kShort : sizeof(Bits) == 4 ? at::kInt : at::kLong;
    return t.view(as).bitwise_and(static_cast<int64_t>(kMagnitude<Bits>)).ne(0).to(at::kByte);
  });
}

}  // namespace

// Positions of one bucket: bit i of words[i / 64] is set when element i is sent.
struct SkipZeroGradientsHook::Live {
  int64_t numel = 0;
  int64_t count = 0;
  std::vector<uint64_t> words;

  // The positions where `presence` (a byte per element) is not 0, and those of `before`.
  static std::shared_ptr<const Live> of(const at::Tensor& presence, const Live* before) {
    auto live = std::make_shared<Live>();
    live->numel = presence.numel();
    live->words.assign(static_cast<size_t>((live->numel + 63) / 64), 0);
    if (before) live->words = before->words;
    const auto* x = presence.const_data_ptr<uint8_t>();
    for (int64_t i = 0; i < live->numel; ++i)
      if (x[i] != 0) live->words[static_cast<size_t>(i / 64)] |= uint64_t{1} << (i % 64);
    for (uint64_t w : live->words) live->count += __builtin_popcountll(w);
    return live;
  }

  // Whether an element of `x` at a position left out is not zero (+0 and -0 are zero).
  template <typename Bits>
  bool any_outside(const Bits* x) const {
    Bits stray = 0;
    for (int64_t w = 0; w * 64 < numel; ++w) {
      const uint64_t m = words[static_cast<size_t>(w)];
      if (m == ~uint64_t{0}) continue;
      const int64_t n = std::min<int64_t>(64, numel - w * 64);
      for (int64_t i = 0; i < n; ++i)
        if (!((m >> i) & 1)) stray |= x[w * 64 + i] & kMagnitude<Bits>;
    }
    return stray != 0;
  }

  // Copies the live elements of `in` to `out`, in order.
  template <typename Bits>
  void gather(const Bits* in, Bits* out) const {
    for (int64_t w = 0; w * 64 < numel; ++w) {
      uint64_t m = words[static_cast<size_t>(w)];
      const Bits* x = in + w * 64;
      if (m == ~uint64_t{0} && numel - w * 64 >= 64) {
        std::memcpy(out, x, 64 * sizeof(Bits));
        out += 64;
        continue;
      }
      for (; m != 0; m &= m - 1) *out++ = x[__builtin_ctzll(m)];
    }
  }

  // The inverse of gather: the live elements from `in`, the others +0 (zero_rest) or left as they are.
  template <typename Bits>
  void scatter(const Bits* in, Bits* out, bool zero_rest) const {
    for (int64_t w = 0; w * 64 < numel; ++w) {
      uint64_t m = words[static_cast<size_t>(w)];
      const int64_t n = std::min<int64_t>(64, numel - w * 64);
      Bits* x = out + w * 64;
      if (n == 64 && m == ~uint64_t{0}) {
        std::memcpy(x, in, 64 * sizeof(Bits));
        in += 64;
      } else if (zero_rest) {
        for (int64_t i = 0; i < n; ++i) x[i] = ((m >> i) & 1) ? *in++ : Bits{0};
      } else {
        for (; m != 0; m &= m - 1) x[__builtin_ctzll(m)] = *in++;
      }
    }
  }

  // The positions here and not in `other`.
  Live minus(const Live& other) const {
    Live rest;
    rest.numel = numel;
    rest.words.resize(words.size());
    for (size_t w = 0; w < words.size(); ++w) {
      rest.words[w] = words[w] & ~other.words[w];
      rest.count += __builtin_popcountll(rest.words[w]);
    }
    return rest;
  }
};

// One bucket's all-reduce in this backward.
struct SkipZeroGradientsHook::Pending {
  size_t index = 0;
  at::Tensor buffer;                 // the bucket, where the result ends up
  at::Tensor whole;                  // the bucket as PyTorch's hooks send it: divided (and float16 or bfloat16)
  at::Tensor sent;                   // what went to the all-reduce: `whole`, or its live positions and the flag
  std::shared_ptr<const Live> live;  // null: the whole bucket was sent
  c10::intrusive_ptr<c10::ivalue::Future> done;
  at::Tensor presence;  // with a whole bucket sent to learn positions: where any rank's gradient is not zero
  c10::intrusive_ptr<c10d::Work> presence_done;

  bool flag_set() const { return sent[live->count].item<float>() != 0; }
  // The compress hooks' last step: the float16 or bfloat16 sums back into the bucket.
  void finish() const {
    if (!whole.is_same(buffer)) buffer.copy_(whole);
  }
};

SkipZeroGradientsHook::SkipZeroGradientsHook(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                             std::optional<at::ScalarType> compress_to)
    : group_(std::move(group)), compress_to_(compress_to) {}

SkipZeroGradientsHook::~SkipZeroGradientsHook() = default;

c10::intrusive_ptr<c10::ivalue::Future> SkipZeroGradientsHook::runHook(c10d::GradBucket& bucket) {
  at::Tensor buffer = bucket.getBufferRef();
  TORCH_CHECK(buffer.device().is_cpu() && buffer.is_contiguous(),
              "dist.skip_zero_gradients works on CPU gradients; this bucket is on ", buffer.device());
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t index = bucket.getIndex();
  if (index == 0) pending_.clear();
  if (live_.size() <= index) {
    live_.resize(index + 1);
    counts_.resize(index + 1, {0, 0});
    layouts_.resize(index + 1);
  }
  // The Reducer rebuilds its buckets once, in gradient-ready order: positions learnt before mean nothing after.
  std::vector<const void*> layout;
  for (const auto& param : bucket.getParameters()) layout.push_back(param.unsafeGetTensorImpl());
  if (layout != layouts_[index]) {
    layouts_[index] = std::move(layout);
    live_[index] = nullptr;
    counts_[index] = {0, 0};
  }

  Pending p;
  p.index = index;
  p.buffer = buffer;
  const bool gathering = worth_gathering(counts_[index]);
  p.live = gathering ? live_[index] : nullptr;
  // This rank's gradients as computed: a position left out must be zero here on every rank.
  bool stray = false;
  if (p.live)
    stray = with_bits(buffer, [&](auto bits) {
      using Bits = decltype(bits);
      return p.live->any_outside(static_cast<const Bits*>(buffer.const_data_ptr()));
    });
  else if (gathering)
    p.presence = presence_of(buffer);  // positions are learnt from this whole all-reduce
  // allreduce_hook divides the bucket in place; the compress hooks cast it to float16 or bfloat16, then divide.
  p.whole = compress_to_ ? buffer.to(*compress_to_) : buffer;
  p.whole.div_(group_->getSize());
  p.sent = p.whole;
  if (p.live) {
    const int64_t k = p.live->count;
    p.sent = at::empty({k + 1}, p.whole.options());
    with_bits(p.whole, [&](auto bits) {
      using Bits = decltype(bits);
      p.live->gather(static_cast<const Bits*>(p.whole.const_data_ptr()), static_cast<Bits*>(p.sent.mutable_data_ptr()));
      return 0;
    });
    p.sent.narrow(0, k, 1).fill_(stray ? 1 : 0);
    ++counts_[index].first;
  }
  stats_.elements += buffer.numel();
  stats_.elements_sent += p.sent.numel();
  ++(p.live ? stats_.gathered_buckets : stats_.whole_buckets);

  std::vector<at::Tensor> tensors{p.sent};
  auto reduced = group_->allreduce(tensors)->getFuture();
  if (p.presence.defined()) p.presence_done = any_rank(p.presence);
  p.done = reduced->then(
      [p](c10::ivalue::Future&) {
        // A set flag: finish_backward learns and sends the new positions; until then the bucket keeps this rank's
        // gradients.
        if (p.live && p.flag_set()) return c10::IValue(p.buffer);
        if (p.live)
          with_bits(p.whole, [&](auto bits) {
            using Bits = decltype(bits);
            p.live->scatter(static_cast<const Bits*>(p.sent.const_data_ptr()), static_cast<Bits*>(p.whole.data_ptr()),
                            /*zero_rest=*/true);
            return 0;
          });
        p.finish();
        return c10::IValue(p.buffer);
      },
      c10::TensorType::get());
  pending_.push_back(p);
  // Queued before the Reducer queues its finalize_backward (after this hook returns for the last bucket), so it
  // runs first, on this thread, when every bucket's all-reduce has been started on every rank.
  if (bucket.isLast()) torch::autograd::Engine::get_default_engine().queue_callback([this] { finish_backward(); });
  return p.done;
}

void SkipZeroGradientsHook::finish_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Pending& p : pending_) {
    p.done->wait();
    if (p.done->hasError()) return;  // the Reducer reports it
    if (p.live && p.flag_set()) {
      repeat(p);
      continue;
    }
    if (!p.presence.defined()) continue;
    p.presence_done->wait();
    live_[p.index] = Live::of(p.presence, nullptr);
  }
  pending_.clear();
}

// Some rank has gradients outside the positions sent. Every rank learns where (a MAX all-reduce of presence) and
// all-reduces its values at the new positions; the gathered sums stay, and the new positions join the others: a
// position that was non-zero once (a unit that was not dead for one batch) is likely to be so again.
void SkipZeroGradientsHook::repeat(Pending& p) {
  ++counts_[p.index].second;
  ++stats_.repeats;
  at::Tensor presence = presence_of(p.buffer);  // compressed: the float gradients, else divided ones
  any_rank(presence)->wait();
  auto grown = Live::of(presence, p.live.get());
  const Live fresh = grown->minus(*p.live);
  at::Tensor values = at::empty({fresh.count}, p.whole.options());
  with_bits(p.whole, [&](auto bits) {
    using Bits = decltype(bits);
    auto* whole = static_cast<Bits*>(p.whole.data_ptr());
    fresh.gather(whole, static_cast<Bits*>(values.mutable_data_ptr()));  // this rank's, before the sums land
    p.live->scatter(static_cast<const Bits*>(p.sent.const_data_ptr()), whole, /*zero_rest=*/true);
    if (fresh.count > 0) {
      std::vector<at::Tensor> tensors{values};
      group_->allreduce(tensors)->wait();
    }
    fresh.scatter(static_cast<const Bits*>(values.const_data_ptr()), whole, /*zero_rest=*/false);
    return 0;
  });
  stats_.elements_sent += fresh.count;
  p.finish();
  live_[p.index] = std::move(grown);
}

c10::intrusive_ptr<c10d::Work> SkipZeroGradientsHook::any_rank(at::Tensor& presence) {
  std::vector<at::Tensor> tensors{presence};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  return group_->allreduce(tensors, options);
}

at::Tensor SkipZeroGradientsHook::parseHookResult(const c10::IValue& result) { return result.toTensor(); }

SkipZeroStats SkipZeroGradientsHook::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace ddp
