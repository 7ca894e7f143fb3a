// FlopCounter: the floating-point operations of matrix products and convolutions, counted as PyTorch counts them.
#include "report/flop_counter.h"

#include <ATen/record_function.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <vector>
#include <cstring>
#include <stdexcept>

namespace ddp {
namespace {

std::atomic<int64_t> counted{0};
std::atomic<bool> counting{false};

std::vector<int64_t> shape(const c10::IValue& v) { return v.toTensor().sizes().vec(); }
std::vector<int64_t> ints(const c10::IValue& v) {  // an int[] or SymInt[] argument
  std::vector<int64_t> out;
  for (const c10::IValue& e : v.toListRef())
    out.push_back(e.isSymInt() ? e.toSymInt().guard_int(__FILE__, __LINE__) : e.toInt());
  return out;
}
int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// torch.utils.flop_counter.conv_flop_count: conv_shape = (x if transposed else out)[2:], (c_out, c_in, *filter) = w.
int64_t conv_flop_count(const std::vector<int64_t>& x, const std::vector<int64_t>& w, const std::vector<int64_t>& out,
                        bool transposed) {
  const std::vector<int64_t>& conv = transposed ? x : out;
  return product(conv, 2) * product(w, 2) * x[0] * w[0] * w[1] * 2;
}
std::vector<int64_t> swap01(std::vector<int64_t> s) {  // flop_counter's t(): batch and channels exchanged
  std::swap(s[0], s[1]);
  return s;
}

// aten::convolution's output shape (a transposed convolution's is not needed by the formula).
std::vector<int64_t> conv_output(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                 const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                 const std::vector<int64_t>& dilation) {
  std::vector<int64_t> out{x[0], w[0]};
  for (size_t d = 2; d < x.size(); ++d)
    out.push_back((x[d] + 2 * padding[d - 2] - dilation[d - 2] * (w[d] - 1) - 1) / stride[d - 2] + 1);
  return out;
}

int64_t mm_flops(const std::vector<int64_t>& a, const std::vector<int64_t>& b) { return a[0] * a[1] * b[1] * 2; }
int64_t bmm_flops(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return a[0] * a[1] * a[2] * b[2] * 2;
}

// torch.utils.flop_counter.sdpa_flop_count: q (b, h, s_q, d_q), k (b, h, s_k, d_q), v (b, h, s_k, d_v); the two
// batched products q k^T and scores v.
int64_t sdpa_flops(const std::vector<int64_t>& q, const std::vector<int64_t>& k, const std::vector<int64_t>& v) {
  const int64_t bh = q[0] * q[1];
  return bmm_flops({bh, q[2], q[3]}, {bh, q[3], k[2]}) + bmm_flops({bh, q[2], k[2]}, {bh, k[2], v[3]});
}

// torch.utils.flop_counter.sdpa_backward_flop_count: the scores recomputed, then the gradients of scores v (grad
// scores, grad v) and of q k^T (grad q, grad k).
int64_t sdpa_backward_flops(const std::vector<int64_t>& grad_out, const std::vector<int64_t>& q,
                            const std::vector<int64_t>& k, const std::vector<int64_t>& v) {
  const int64_t bh = q[0] * q[1], s_q = q[2], d_q = q[3], s_k = k[2], d_v = v[3];
  (void)grad_out;  // (b, h, s_q, d_v), as the formula asserts
  return bmm_flops({bh, s_q, d_q}, {bh, d_q, s_k}) + bmm_flops({bh, s_q, d_v}, {bh, d_v, s_k}) +
         bmm_flops({bh, s_k, s_q}, {bh, s_q, d_v}) + bmm_flops({bh, s_q, s_k}, {bh, s_k, d_q}) +
         bmm_flops({bh, d_q, s_q}, {bh, s_q, s_k});
}

// The fused attention kernels FlopCounterMode registers (torch/utils/flop_counter.py sdpa_flop and
// sdpa_backward_flop): their query, key, value (after grad_out for a backward) lead their arguments. The CPU's
// _scaled_dot_product_flash_attention_for_cpu and its backward are not among them (FlopCounterMode counts them as 0),
// and the math fallback counts as the matrix products it runs.
bool is_one_of(const char* name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

}  // namespace

int64_t operator_flops(const char* name, c10::ArrayRef<const c10::IValue> in) {
  if (is_one_of(name, {"aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
                       "aten::_scaled_dot_product_cudnn_attention"}))
    return sdpa_flops(shape(in[0]), shape(in[1]), shape(in[2]));
  if (is_one_of(name, {"aten::_scaled_dot_product_flash_attention_backward",
                       "aten::_scaled_dot_product_efficient_attention_backward",
                       "aten::_scaled_dot_product_cudnn_attention_backward"}))
    return sdpa_backward_flops(shape(in[0]), shape(in[1]), shape(in[2]), shape(in[3]));
  if (std::strcmp(name, "aten::mm") == 0) return mm_flops(shape(in[0]), shape(in[1]));
  if (std::strcmp(name, "aten::addmm") == 0) return mm_flops(shape(in[1]), shape(in[2]));
  if (std::strcmp(name, "aten::bmm") == 0) return bmm_flops(shape(in[0]), shape(in[1]));
  if (std::strcmp(name, "aten::baddbmm") == 0) return bmm_flops(shape(in[1]), shape(in[2]));
  if (std::strcmp(name, "aten::convolution") == 0) {
    const auto x = shape(in[0]), w = shape(in[1]);
    const bool transposed = in[6].toBool();
    const auto out = transposed ? x : conv_output(x, w, ints(in[3]), ints(in[4]), ints(in[5]));
    return conv_flop_count(x, w, out, transposed);
  }
  if (std::strcmp(name, "aten::convolution_backward") == 0) {
    const auto grad_out = shape(in[0]), x = shape(in[1]), w = shape(in[2]);
    const bool transposed = in[7].toBool();
    const auto mask = in[10].toBoolList();
    int64_t flops = 0;
    if (mask.get(0)) flops += conv_flop_count(grad_out, w, x, !transposed);
    if (mask.get(1))
      flops += transposed ? conv_flop_count(swap01(grad_out), swap01(x), swap01(w), false)
                          : conv_flop_count(swap01(x), swap01(grad_out), swap01(w), false);
    return flops;
  }
  return 0;
}

namespace {

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  if (fn.num_inputs() > 0) counted += operator_flops(fn.name(), fn.inputs());
  return nullptr;
}

}  // namespace

FlopCounter::FlopCounter() {
  if (counting.exchange(true)) throw std::logic_error("FlopCounter: one at a time");
  counted = 0;
  handle_ =
      at::addGlobalCallback(at::RecordFunctionCallback(on_op).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() {
  at::removeCallback(handle_);
  counting = false;
}

int64_t FlopCounter::flops() const { return counted; }

}  // namespace ddp
