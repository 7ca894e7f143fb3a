// PowerSgdHook: powerSGD_hook's steps (torch 2.11's powerSGD_hook.py) on c10d's ProcessGroup, in its order.
#include "distributed/powersgd_hook.h"

#include "base/host_copy.h"
#include "config/config.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace ddp {
namespace {

// PowerSGDState.maybe_increase_iter: one more iteration once the last bucket of a backward is done.
void maybe_increase_iter(PowerSgdState& s, bool last_bucket) {
  if (!last_bucket) return;
  ++s.iter;
  s.elements_last_iter = s.elements_this_iter;
  s.elements_this_iter = 0;
}

// The indices of the matrices to compress grouped by shape, groups in order of their shape's first appearance: the
// order of powerSGD_hook's shape_to_tensors (a dict of lists), which lays out the P and Q memories and draws the
// random Qs.
std::vector<size_t> grouped_by_shape(const std::vector<at::Tensor>& matrices) {
  std::vector<size_t> out;
  std::vector<bool> taken(matrices.size(), false);
  for (size_t i = 0; i < matrices.size(); ++i) {
    if (taken[i]) continue;
    for (size_t j = i; j < matrices.size(); ++j)
      if (!taken[j] && matrices[j].sizes() == matrices[i].sizes()) {
        out.push_back(j);
        taken[j] = true;
      }
  }
  return out;
}

// Where the bucket holds `t` (one of its gradients), the same elements of `values`, a tensor of the bucket's layout.
at::Tensor same_place(const at::Tensor& t, const at::Tensor& bucket, const at::Tensor& values) {
  TORCH_CHECK(t.is_alias_of(bucket) && t.is_contiguous(), "PowerSGD: a gradient that is not a view into its bucket");
  const int64_t at = t.storage_offset() - bucket.storage_offset();
  return values.slice(0, at, at + t.numel()).view(t.sizes());
}

// A future already done, of an empty list of tensors, typed for `devices` (none: the CPU).
c10::intrusive_ptr<c10::ivalue::Future> completed_future(std::vector<c10::Device> devices) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(), std::move(devices));
  done->markCompleted(c10::IValue(c10::List<at::Tensor>()));
  return done;
}

c10::intrusive_ptr<c10::ivalue::Future> allreduce(c10d::ProcessGroup& group, const at::Tensor& t) {
  std::vector<at::Tensor> tensors{t};
  return group.allreduce(tensors)->getFuture();
}

// The hook's one bucket in flight: views into the bucket, into what is compressed and into the P and Q memories.
//
// The hook adds the residual to the bucket, copies the sum (input_tensor_cp), compresses the bucket and at last
// keeps input_tensor_cp - input_tensor. Here the sum is written once, into the residual's own buffer, and compressed
// from there: the same values (the hook reads the residual only in that add, and float addition commutes), in one
// pass over the gradients where the add and the copy make two; the bucket receives only the decompressed result.
// Sum and residual are formed a gradient at a time (the operations are elementwise), each beside the product that
// reads or writes the same elements while they are still in cache.
struct Compressing {
  int64_t index = 0;
  bool last = false;
  int64_t world = 1;
  at::Tensor input;  // the bucket
  at::Tensor sum;    // error feedback: bucket + residual, in the residual's buffer (input_tensor_cp); else undefined
  bool new_residual = false;             // the residual's buffer is new this step: the sum is the bucket as it is
  bool measure = false;                  // the state measures residuals: their squares are added up
  std::vector<at::Tensor> uncompressed;  // views into the bucket, sent as they are
  std::vector<at::Tensor> uncompressed_sources;  // their places in what is compressed (the sum, or the bucket), flat
  at::Tensor uncompressed_memory;
  // [1, n, m] views into what is compressed (the sum, or the bucket) and into the bucket; [1, n, r], [1, m, r]
  std::vector<at::Tensor> matrices, outputs, ps, qs;
  at::Tensor p_memory, q_memory;
};

// out = a b for one [1, rows, r] product to a factor (torch.bmm in powerSGD_hook.py). On the CPU a row-major
// [rows, r] result of a few columns is a gemm whose first dimension is r, for which MKL's sgemm takes a path several
// times slower than reading `a` once; `transposed` computes out^T = b^T a^T instead, the long dimension first, with
// b^T copied contiguous (a few thousand elements; MKL reads a transposed small operand on a slower path: ResNet-18's
// P products of a step 7.6 against 4.4 ms on one thread), and copies the small result back: the same dot products,
// added in another order.
void product_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b, bool transposed) {
  if (transposed && out.is_cpu())
    out[0].copy_(at::mm(b[0].t().contiguous(), a[0].t()).t());
  else
    at::bmm_out(out, a, b);
}

// One gradient's part of the hook's input_tensor.add_(error) and input_tensor_cp = clone: `sum`, the gradient's place
// in the residual's buffer, becomes gradient + residual, or the gradient where the residual is new (the hook adds
// nothing at a bucket's first compressed step).
void fold_in(at::Tensor sum, const at::Tensor& gradient, bool new_residual) {
  if (new_residual)
    sum.copy_(gradient);
  else
    sum.add_(gradient);
}

// On x86-64 the loops below are compiled for AVX2 and for the baseline, the one to run picked when the program loads
// (GCC's and Clang's function multiversioning); elsewhere for the target as built.
#if defined(__x86_64__) && defined(__GNUC__)
#define DDP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DDP_VECTOR_CLONES
#endif

// a -= b over n floats (the same rounding as a.sub_(b)), and the sum of the results' squares, added in double.
DDP_VECTOR_CLONES double subtract_adding_squares(float* a, const float* b, int64_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const float v = a[i + k] - b[i + k];
      a[i + k] = v;
      lanes[k] += static_cast<double>(v) * static_cast<double>(v);
    }
  for (; i < n; ++i) {
    const float v = a[i] - b[i];
    a[i] = v;
    lanes[0] += static_cast<double>(v) * static_cast<double>(v);
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// Transposed products' decompression P Q^T on the CPU, rows [0, n) of an n x m float matrix at `out`, from P (n x r,
// row-major) and Q^T (r x m, row-major): out[i][j] = P[i][0] Q[j][0] + P[i][1] Q[j][1] + ..., each product rounded to
// float before its addition, in that order (no fused multiply-add: the build turns contraction off), as torch's
// separate multiplies and adds of outer products compute it. With `sum` (error feedback), sum -= out in the same
// pass, and the sum of the results' squares in double is returned (0 without `sum`).
DDP_VECTOR_CLONES double decompress_rows(float* out, float* sum, const float* p, const float* qt, int64_t n, int64_t m,
                                         int64_t r) {
  constexpr int64_t kBlock = 512;
  float v[kBlock];
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* pi = p + i * r;
    for (int64_t at = 0; at < m; at += kBlock) {
      const int64_t len = std::min(kBlock, m - at);
      const float first = pi[0];
      for (int64_t j = 0; j < len; ++j) v[j] = first * qt[at + j];
      for (int64_t k = 1; k < r; ++k) {
        const float pk = pi[k];
        const float* q = qt + k * m + at;
        for (int64_t j = 0; j < len; ++j) {
          const float product = pk * q[j];
          v[j] = v[j] + product;
        }
      }
      std::memcpy(out + i * m + at, v, static_cast<size_t>(len) * sizeof(float));
      if (sum) squares += subtract_adding_squares(sum + i * m + at, v, len);
    }
  }
  return squares;
}

// The most columns of P that fold_in_and_project computes in one pass.
constexpr int64_t kProjectedRanks = 4;

// Eight float lanes (GCC's and Clang's vector extension: AVX2 registers in the avx2 clone, SSE pairs otherwise).
typedef float Lanes __attribute__((vector_size(32)));

// Rows [0, n) of P = M Q (n x R, row-major) for an n x m float matrix M whose rows are contiguous, with error
// feedback's sum formed in the same pass: with `sum`, each row is written there first as residual + gradient (the
// gradient alone where the residual is new) and M is the sum; without it, M is `gradient`. Q comes as Q^T (R x m,
// row-major). P[i][k] adds the products M[i][j] Q[j][k], each rounded to float, into eight partial sums, element j
// into sum j mod 8 in the order of j, then adds those as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
template <int R>
__attribute__((always_inline)) inline void project_rows(float* sum, const float* gradient, bool new_residual,
                                                        const float* qt, float* p, int64_t n, int64_t m) {
  for (int64_t i = 0; i < n; ++i) {
    const float* g = gradient + i * m;
    float* row = sum ? sum + i * m : nullptr;
    Lanes acc[R], v, q;
    for (int k = 0; k < R; ++k) acc[k] = Lanes{0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
      std::memcpy(&v, g + j, sizeof v);
      if (row != nullptr) {
        if (!new_residual) {
          Lanes r;
          std::memcpy(&r, row + j, sizeof r);
          v = r + v;
        }
        std::memcpy(row + j, &v, sizeof v);
      }
      for (int k = 0; k < R; ++k) {
        std::memcpy(&q, qt + k * m + j, sizeof q);
        acc[k] = acc[k] + v * q;
      }
    }
    float a[R][8];
    std::memcpy(a, acc, sizeof a);
    for (int l = 0; j + l < m; ++l) {
      float x = g[j + l];
      if (row != nullptr) {
        if (!new_residual) x = row[j + l] + x;
        row[j + l] = x;
      }
      for (int k = 0; k < R; ++k) {
        const float product = x * qt[k * m + j + l];
        a[k][l] = a[k][l] + product;
      }
    }
    for (int k = 0; k < R; ++k)
      p[i * R + k] = ((a[k][0] + a[k][1]) + (a[k][2] + a[k][3])) + ((a[k][4] + a[k][5]) + (a[k][6] + a[k][7]));
  }
}

// project_rows for r = 1 .. kProjectedRanks: one read of the gradient and residual where forming the sum and reading
// it back for the product take two.
DDP_VECTOR_CLONES void fold_in_and_project(float* sum, const float* gradient, bool new_residual, const float* qt,
                                           float* p, int64_t n, int64_t m, int64_t r) {
  switch (r) {
    case 1:
      return project_rows<1>(sum, gradient, new_residual, qt, p, n, m);
    case 2:
      return project_rows<2>(sum, gradient, new_residual, qt, p, n, m);
    case 3:
      return project_rows<3>(sum, gradient, new_residual, qt, p, n, m);
    case 4:
      return project_rows<4>(sum, gradient, new_residual, qt, p, n, m);
    default:
      TORCH_CHECK(false, "PowerSGD: one pass for rank ", r, " above ", kProjectedRanks);
  }
}

// P = M Q for one gradient, with error feedback's sum formed first (fold_in) where `sum` is defined: `matrix` is the
// sum's [1, n, m] view, or the gradient's without error feedback. Transposed products of contiguous float rows on the
// CPU take one pass (fold_in_and_project); otherwise the sum, then product_into.
void fold_in_and_product(at::Tensor p, const at::Tensor& matrix, const at::Tensor& gradient, const at::Tensor& q,
                         bool error_feedback, bool new_residual, bool transposed) {
  const int64_t r = p.size(2);
  const bool one_pass = transposed && matrix.is_cpu() && matrix.scalar_type() == at::kFloat &&
                        gradient.scalar_type() == at::kFloat && r <= kProjectedRanks && matrix[0].is_contiguous() &&
                        gradient[0].is_contiguous() && p[0].is_contiguous();
  if (!one_pass) {
    if (error_feedback) fold_in(matrix, gradient, new_residual);
    product_into(p, matrix, q, transposed);
    return;
  }
  const at::Tensor qt = q[0].t().contiguous();
  fold_in_and_project(error_feedback ? matrix.data_ptr<float>() : nullptr, gradient.data_ptr<float>(), new_residual,
                      qt.data_ptr<float>(), p.data_ptr<float>(), matrix.size(1), matrix.size(2), r);
}

// One piece of the hook's input_tensor_cp - input_tensor, written over `sum`; with `squares`, the squares of the
// result are added to it, or it is reset when they cannot be added up here (then the norm takes a pass of its own).
void subtract(at::Tensor sum, const at::Tensor& decompressed, std::optional<double>& squares) {
  const bool here = squares && sum.is_cpu() && sum.scalar_type() == at::kFloat &&
                    decompressed.scalar_type() == at::kFloat && decompressed.is_cpu() && sum.is_contiguous() &&
                    decompressed.is_contiguous() && sum.sizes() == decompressed.sizes();
  if (!here) {
    sum.sub_(decompressed);
    squares.reset();
    return;
  }
  *squares += subtract_adding_squares(sum.data_ptr<float>(), decompressed.data_ptr<float>(), sum.numel());
}

constexpr const char* kEntry = "powersgd";

std::runtime_error bad_entry(const std::string& why) {
  return std::runtime_error(std::string("checkpoint entry \"") + kEntry + "\": " + why);
}

// Bucket index -> tensor; `copy`: each a host_copy (state the hook goes on changing), else as given.
c10::impl::GenericDict tensor_dict(const std::map<int64_t, at::Tensor>& tensors, bool copy) {
  c10::impl::GenericDict out(c10::IntType::get(), c10::TensorType::get());
  for (const auto& [index, t] : tensors) out.insert(index, copy ? host_copy(t) : t);
  return out;
}

const c10::IValue& field(const c10::impl::GenericDict& d, const std::string& name) {
  const auto it = d.find(name);
  if (it == d.end()) throw bad_entry("no \"" + name + "\"");
  return it->value();
}

int64_t int_field(const c10::impl::GenericDict& d, const std::string& name) {
  const c10::IValue& v = field(d, name);
  if (!v.isInt() || v.toInt() < 0) throw bad_entry("\"" + name + "\" is not a count");
  return v.toInt();
}

std::map<int64_t, at::Tensor> tensors_of(const c10::IValue& v, const std::string& name, const at::Device& device) {
  if (!v.isGenericDict()) throw bad_entry("\"" + name + "\" is not a dict of bucket index -> tensor");
  std::map<int64_t, at::Tensor> out;
  for (const auto& item : v.toGenericDict()) {
    if (!item.key().isInt() || !item.value().isTensor())
      throw bad_entry("\"" + name + "\" is not a dict of bucket index -> tensor");
    out[item.key().toInt()] = item.value().toTensor().to(device);
  }
  return out;
}

// Whether `buffer` can take `t`'s values in place: defined, of its sizes, dtype and device.
bool fits(const at::Tensor& buffer, const at::Tensor& t) {
  return buffer.defined() && buffer.sizes().equals(t.sizes()) && buffer.dtype() == t.dtype() &&
         buffer.device() == t.device();
}

// Whether `memories` holds the bucket's P or Q memory as this step lays it out: `size` elements of `options`' dtype
// on its device. One restored from a checkpoint written with another rank, compression rule or bucket layout is not.
bool holds_memory(const std::map<int64_t, at::Tensor>& memories, int64_t index, int64_t size,
                  const at::TensorOptions& options) {
  const auto it = memories.find(index);
  return it != memories.end() && it->second.dim() == 1 && it->second.numel() == size &&
         it->second.scalar_type() == options.dtype().toScalarType() && it->second.device() == options.device();
}

// The bucket's work on this thread before its first all-reduce, under the state's lock: before options.start_iter
// only the count (false: the bucket is all-reduced whole); then error feedback on the tensors sent whole, the split
// into matrices to compress and tensors sent whole, their P and Q views in the bucket's memories and the Qs (the last
// step's orthogonalised, or random).
bool prepare_bucket(PowerSgdState& s, c10d::GradBucket& bucket, Compressing& c) {
  const PowerSgdOptions& o = s.options;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.iter < o.start_iter) {
      s.elements_this_iter += c.input.numel();
      maybe_increase_iter(s, c.last);
      return false;
    }
    const auto options = c.input.options();
    const std::vector<at::Tensor> gradients = bucket.getGradients();
    if (o.use_error_feedback) {
      // input_tensor.add_(state.error_dict[bucket_index]) and input_tensor_cp = input_tensor.clone(), as one sum
      // formed a gradient at a time below: every element of the bucket must belong to one of them.
      int64_t covered = 0;
      for (const at::Tensor& t : gradients) covered += t.numel();
      TORCH_CHECK(covered == c.input.numel(), "PowerSGD: a bucket of ", c.input.numel(),
                  " elements whose gradients hold ", covered);
      c.measure = s.measure_residuals;
      at::Tensor& kept = s.error[c.index];
      c.new_residual = !fits(kept, c.input);
      if (c.new_residual) kept = at::empty_like(c.input, at::MemoryFormat::Contiguous);
      c.sum = kept;
    }
    const at::Tensor& source = c.sum.defined() ? c.sum : c.input;
    std::vector<at::Tensor> to_compress, compressed_in_bucket;
    int64_t ps_size = 0, qs_size = 0;
    for (const at::Tensor& t : gradients) {
      at::Tensor matrix = t.view({t.size(0), -1});
      const int64_t n = matrix.size(0), m = matrix.size(1);
      const int64_t r = std::min({n, m, o.matrix_approximation_rank});
      const CompressTest test = should_compress(n, m, r, o.min_compression_rate);
      s.numel_before_compression += test.uncompressed;
      s.elements_this_iter += test.compress ? test.compressed : test.uncompressed;
      if (test.compress) {
        to_compress.push_back(same_place(t, c.input, source).view({n, m}));
        compressed_in_bucket.push_back(matrix);
        ps_size += n * r;
        qs_size += m * r;
        s.numel_after_compression += test.compressed;
      } else {
        c.uncompressed.push_back(t);
        c.uncompressed_sources.push_back(same_place(t, c.input, source).view(-1));
        if (c.sum.defined()) fold_in(c.uncompressed_sources.back(), t.view(-1), c.new_residual);
        s.numel_after_compression += test.uncompressed;
      }
    }
    c.uncompressed_memory = c.uncompressed_sources.empty() ? at::empty({0}, options) : at::cat(c.uncompressed_sources);

    // powerSGD_hook draws new Qs when warm start is off or the bucket has no memories yet; memories of another
    // layout (restored from a checkpoint of other settings) cannot be warm-started from either.
    const bool randomize_qs = !o.warm_start || !holds_memory(s.p_memory, c.index, ps_size, options) ||
                              !holds_memory(s.q_memory, c.index, qs_size, options);
    if (randomize_qs) {
      s.p_memory[c.index] = at::empty({ps_size}, options);
      s.q_memory[c.index] = at::empty({qs_size}, options);
    }
    c.p_memory = s.p_memory.at(c.index);
    c.q_memory = s.q_memory.at(c.index);
    int64_t p_at = 0, q_at = 0;
    for (const size_t i : grouped_by_shape(to_compress)) {
      const at::Tensor& matrix = to_compress[i];
      const int64_t n = matrix.size(0), m = matrix.size(1);
      const int64_t r = std::min({n, m, o.matrix_approximation_rank});
      c.matrices.push_back(matrix.unsqueeze(0));
      c.outputs.push_back(compressed_in_bucket[i].unsqueeze(0));
      c.ps.push_back(c.p_memory.slice(0, p_at, p_at + n * r).view({1, n, r}));
      c.qs.push_back(c.q_memory.slice(0, q_at, q_at + m * r).view({1, m, r}));
      p_at += n * r;
      q_at += m * r;
    }
    if (!randomize_qs) {
      for (at::Tensor& q : c.qs) orthogonalize(q, o.orthogonalization_epsilon);
    } else {
      // torch.manual_seed(state.rng.randint(1_000_000_000)) inside fork_rng, then torch.randn on the CPU per Q.
      auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(s.rng.randint_billion()));
      for (at::Tensor& q : c.qs) {
        q.copy_(at::randn(q.sizes(), generator, at::TensorOptions().dtype(options.dtype()).device(at::kCPU)));
        orthogonalize(q, o.orthogonalization_epsilon);
      }
    }
  }
  return true;
}

// P = M Q for each matrix (powerSGD_hook's torch.bmm(tensor, q, out=p)), error feedback's sum formed beside it.
void compute_ps(const PowerSgdOptions& o, Compressing& c) {
  for (size_t i = 0; i < c.matrices.size(); ++i)
    fold_in_and_product(c.ps[i], c.matrices[i], c.outputs[i], c.qs[i], c.sum.defined(), c.new_residual,
                        o.transposed_products);
}

// The hook's decompress: M = P Q^T into the bucket, the residual kept, the iteration counted.
c10::IValue decompress(PowerSgdState& s, Compressing& c) {
  c.q_memory.div_(c.world);
  // state.error_dict[bucket_index] = input_tensor_cp - input_tensor, the same subtraction written over the sum (a
  // checkpoint holds gathered copies of the residuals, never these tensors), a gradient at a time.
  std::optional<double> squares;
  if (c.measure) squares = 0.0;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    if (s.options.transposed_products && c.outputs[i].is_cpu() && c.outputs[i].scalar_type() == at::kFloat) {
      // One pass: the decompressed matrix, and with error feedback the residual beside it (the sum's rows are
      // contiguous, as the bucket's are).
      const at::Tensor p = c.ps[i][0].contiguous(), qt = c.qs[i][0].t().contiguous();
      at::Tensor out = c.outputs[i][0];
      at::Tensor sum = c.sum.defined() ? c.matrices[i][0] : at::Tensor();
      TORCH_CHECK(out.is_contiguous() && (!sum.defined() || sum.is_contiguous()),
                  "PowerSGD: a matrix that is not contiguous");
      const double added =
          decompress_rows(out.data_ptr<float>(), sum.defined() ? sum.data_ptr<float>() : nullptr, p.data_ptr<float>(),
                          qt.data_ptr<float>(), out.size(0), out.size(1), p.size(1));
      if (squares) *squares += added;
      continue;
    }
    at::bmm_out(c.outputs[i], c.ps[i], c.qs[i].transpose(1, 2));
    if (c.sum.defined()) subtract(c.matrices[i][0], c.outputs[i][0], squares);
  }
  if (c.sum.defined())
    for (size_t i = 0; i < c.uncompressed.size(); ++i)
      subtract(c.uncompressed_sources[i], c.uncompressed[i].view(-1), squares);
  if (c.input.is_cuda())  // as the hook's torch.cuda.synchronize(device)
    c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->synchronizeDevice(c.input.device().index());
  std::lock_guard<std::mutex> lock(s.mutex);
  if (squares) s.residual_squares[c.index] = *squares;
  if (!s.options.warm_start) {
    s.p_memory.clear();
    s.q_memory.clear();
  }
  maybe_increase_iter(s, c.last);
  return c10::IValue(c.input);
}

}  // namespace

c10::impl::GenericDict powersgd_entry(const PowerSgdState& s,
                                      const std::vector<std::map<int64_t, at::Tensor>>& errors) {
  std::lock_guard<std::mutex> lock(s.mutex);
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("iter", s.iter);
  // The settings that lay out the P and Q memories, under PowerSGDState's names: a run resumed with others says so.
  out.insert("matrix_approximation_rank", s.options.matrix_approximation_rank);
  out.insert("min_compression_rate", s.options.min_compression_rate);
  std::ostringstream rng;
  rng << s.rng.engine();
  out.insert("rng", rng.str());  // std::mt19937's text form: the 624 words and the position
  out.insert("total_numel_before_compression", s.numel_before_compression);
  out.insert("total_numel_after_compression", s.numel_after_compression);
  out.insert("p_memory_dict", tensor_dict(s.p_memory, true));
  out.insert("q_memory_dict", tensor_dict(s.q_memory, true));
  c10::impl::GenericList per_rank(c10::DictType::create(c10::IntType::get(), c10::TensorType::get()));
  for (const auto& e : errors) per_rank.push_back(tensor_dict(e, false));
  out.insert("error_dict", per_rank);  // one dict per rank: each rank's residuals are its own
  return out;
}

std::string load_powersgd_entry(PowerSgdState& s, const c10::IValue& entry, int64_t rank, int64_t world_size,
                                const at::Device& device) {
  if (!entry.isGenericDict()) throw bad_entry("not a dict but a " + entry.tagKind());
  const auto d = entry.toGenericDict();
  const c10::IValue& rng = field(d, "rng");
  std::mt19937 engine;
  if (rng.isString()) {
    std::istringstream in(rng.toStringRef());
    in >> engine;
    if (in.fail()) throw bad_entry("\"rng\" is not a generator state");
  } else {
    throw bad_entry("\"rng\" is not a generator state");
  }
  const c10::IValue& errors = field(d, "error_dict");
  if (!errors.isList()) throw bad_entry("\"error_dict\" is not a list of one dict per rank");
  const auto per_rank = errors.toListRef();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.iter = int_field(d, "iter");
  s.rng.engine() = engine;
  s.numel_before_compression = int_field(d, "total_numel_before_compression");
  s.numel_after_compression = int_field(d, "total_numel_after_compression");
  s.p_memory = tensors_of(field(d, "p_memory_dict"), "p_memory_dict", device);
  s.q_memory = tensors_of(field(d, "q_memory_dict"), "q_memory_dict", device);
  s.error.clear();
  std::vector<std::string> said;
  if (static_cast<int64_t>(per_rank.size()) == world_size)
    s.error = tensors_of(per_rank[static_cast<size_t>(rank)], "error_dict", device);
  else
    said.push_back("PowerSGD: the checkpoint holds the error-feedback residuals of " + std::to_string(per_rank.size()) +
                   " ranks and this run has " + std::to_string(world_size) +
                   ": every rank's residuals start from zero (the step count, the Q memories and the generator are "
                   "kept)");
  // Entries written before these settings were kept say nothing of them.
  std::vector<std::string> changed;
  if (const auto it = d.find("matrix_approximation_rank");
      it != d.end() && it->value().isInt() && it->value().toInt() != s.options.matrix_approximation_rank)
    changed.push_back("dist.powersgd_rank " + std::to_string(it->value().toInt()) + " -> " +
                      std::to_string(s.options.matrix_approximation_rank));
  if (const auto it = d.find("min_compression_rate");
      it != d.end() && it->value().isDouble() && it->value().toDouble() != s.options.min_compression_rate) {
    std::ostringstream line;
    line << "dist.powersgd_min_compression_rate " << it->value().toDouble() << " -> " << s.options.min_compression_rate;
    changed.push_back(line.str());
  }
  if (!changed.empty())
    said.push_back("PowerSGD: the checkpoint was written with other settings (" + join(changed) +
                   "): each bucket whose P and Q matrices change size starts from random Qs, as at its first "
                   "compressed step");
  return join(said, "; ");
}

void powersgd_start_over(PowerSgdState& s) {
  std::lock_guard<std::mutex> lock(s.mutex);
  s.error.clear();
  s.p_memory.clear();
  s.q_memory.clear();
  s.residual_squares.clear();
}

CompressTest should_compress(int64_t n, int64_t m, int64_t rank, double min_compression_rate) {
  CompressTest t;
  t.uncompressed = n * m;
  t.compressed = (n + m) * rank;
  t.compress = static_cast<double>(t.compressed) * min_compression_rate < static_cast<double>(t.uncompressed);
  return t;
}

int64_t NumpyRandomState::randint_billion() {
  // randint(0, 10**9): rng = 999999999, mask = 2**30 - 1; draws above rng are rejected (buffered_bounded_masked).
  constexpr uint32_t kRange = 999999999u, kMask = (1u << 30) - 1;
  while (true) {
    const uint32_t v = static_cast<uint32_t>(mt_()) & kMask;
    if (v <= kRange) return v;
  }
}

void orthogonalize(at::Tensor& matrices, double epsilon) {
  const int64_t rank = matrices.size(2);
  const auto dtype = matrices.scalar_type();
  if (rank <= 2 || dtype == at::kHalf || dtype == at::kBFloat16) {
    // _orthogonalize_gram_schmidt
    for (int64_t i = 0; i < rank; ++i) {
      at::Tensor col = matrices.slice(2, i, i + 1);
      at::Tensor norm = at::linalg_vector_norm(col, 2, at::IntArrayRef{1}, /*keepdim=*/true);
      if (epsilon == 0)
        col.div_(norm);
      else
        col.div_(norm + epsilon);
      if (i + 1 < rank) {
        at::Tensor rest = matrices.slice(2, i + 1);
        rest.sub_(at::sum(col * rest, at::IntArrayRef{1}, /*keepdim=*/true) * col);
      }
    }
    return;
  }
  at::Tensor r = at::empty({matrices.size(0), rank, rank}, matrices.options());
  at::linalg_qr_out(matrices, r, matrices);
}

c10::intrusive_ptr<c10::ivalue::Future> PowerSgdHook::runHook(c10d::GradBucket& bucket) {
  auto c = std::make_shared<Compressing>();
  c->world = group_->getSize();
  c->input = bucket.getBufferRef();
  c->index = static_cast<int64_t>(bucket.getIndex());
  c->last = bucket.isLast();
  auto group = group_;
  const auto tensors = c10::ListType::ofTensors();
  // The chain's futures are typed for the bucket's device, as the process group's are (thenAsync's child takes its
  // parent's devices): a CUDA future's callbacks run on streams that wait for the work it stands for
  // (ivalue::Future::invokeCallback), where a CPU future's run at once on the current stream, before an all-reduce's
  // result is there.
  if (c->input.is_cuda() && tail_->devices() != std::vector<c10::Device>{c->input.device()})
    tail_ = completed_future({c->input.device()});
  if (!prepare_bucket(*state_, bucket, *c)) {
    c->input.div_(c->world);  // default_hooks._allreduce_fut: the division first, against overflow
    tail_ = tail_->thenAsync([c, group](c10::ivalue::Future&) { return allreduce(*group, c->input); }, tensors);
    return tail_;
  }
  // As in powerSGD_hook, the uncompressed tensors' all-reduce starts before the Ps are computed, and the Ps' all-reduce
  // is chained to it only once they are (a callback of a future already done runs at once, on this thread).
  auto uncompressed_done =
      tail_->thenAsync([c, group](c10::ivalue::Future&) { return allreduce(*group, c->uncompressed_memory); }, tensors);
  compute_ps(state_->options, *c);
  // unpack_uncompressed_tensors_and_allreduce_ps
  auto ps_done = uncompressed_done->thenAsync(
      [c, group](c10::ivalue::Future& done) {
        at::Tensor sums = done.value().toTensorVector().at(0).div_(c->world);
        int64_t at = 0;
        for (at::Tensor& t : c->uncompressed) {
          t.copy_(sums.slice(0, at, at + t.numel()).view_as(t));
          at += t.numel();
        }
        return allreduce(*group, c->p_memory);
      },
      tensors);
  // compute_qs
  const double epsilon = state_->options.orthogonalization_epsilon;
  const bool transposed = state_->options.transposed_products;
  auto qs_done = ps_done->thenAsync(
      [c, group, epsilon, transposed](c10::ivalue::Future&) {
        for (at::Tensor& p : c->ps) orthogonalize(p, epsilon);
        for (size_t i = 0; i < c->matrices.size(); ++i)
          product_into(c->qs[i], c->matrices[i].transpose(1, 2), c->ps[i], transposed);
        return allreduce(*group, c->q_memory);
      },
      tensors);
  auto state = state_;
  tail_ = qs_done->then([c, state](c10::ivalue::Future&) { return decompress(*state, *c); }, c10::TensorType::get());
  return tail_;
}

PowerSgdHook::PowerSgdHook(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<PowerSgdState> state)
    : group_(std::move(group)), state_(std::move(state)), tail_(completed_future({})) {}

at::Tensor PowerSgdHook::parseHookResult(const c10::IValue& result) {
  return result.isTensor() ? result.toTensor() : result.toTensorVector().at(0);
}

}  // namespace ddp
