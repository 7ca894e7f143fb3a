// DistributedDataParallel: c10d::Reducer + broadcast_coalesced, mirroring DDP's __init__ and forward in PyTorch 2.11.
#include "distributed/ddp.h"

#include "base/number_text.h"
#include "distributed/compress_hook.h"
#include "distributed/ddp_reducer.h"
#include "distributed/powersgd_hook.h"
#include "distributed/reduce.h"
#include "distributed/skip_zero_hook.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>

#include <climits>
#include <cmath>

namespace ddp {
namespace {

constexpr int64_t kFirstBucketBytes = 1024 * 1024;            // dist._DEFAULT_FIRST_BUCKET_BYTES
constexpr size_t kNamedUnused = 8;  // parameters named in the error for gradients that never came

// True when every element is +0 (bit pattern all zero; -0 and NaN are not).
bool all_bits_zero(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1:
      return !t.view(at::kByte).any().item<bool>();
    case 2:
      return !t.view(at::kShort).any().item<bool>();
    case 4:
      return !t.view(at::kInt).any().item<bool>();
    case 8:
      return !t.view(at::kLong).any().item<bool>();
    default:
      return false;
  }
}

PowerSgdOptions powersgd_options(const DistConfig& cfg) {
  PowerSgdOptions o;
  o.matrix_approximation_rank = cfg.powersgd_rank;
  o.start_iter = cfg.powersgd_start_step;
  o.min_compression_rate = cfg.powersgd_min_compression_rate;
  o.use_error_feedback = cfg.powersgd_error_feedback;
  o.warm_start = cfg.powersgd_warm_start;
  o.orthogonalization_epsilon = cfg.powersgd_epsilon;
  o.random_seed = static_cast<uint32_t>(cfg.powersgd_seed);
  o.transposed_products = cfg.powersgd_products == PowerSgdProducts::Transposed;
  return o;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, const DistContext& ctx,
                                                 const DistConfig& cfg)
    : module_(std::move(module)), ctx_(ctx), cfg_(cfg) {
  TORCH_CHECK(ctx_.distributed(), "DistributedDataParallel needs a process group");
  for (auto& named : module_->named_parameters())
    if (named.value().requires_grad()) {
      params_.push_back(named.value());
      param_names_.push_back(named.key());
    }
  buffers_ = module_->buffers();

  {
    PhaseScope waiting(*ctx_.activity, Phase::kCollective);
    c10d::verify_params_across_processes(ctx_.group, params_, std::nullopt);
  }
  // _sync_module_states: parameters then buffers, from rank 0.
  std::vector<at::Tensor> states = module_->parameters();
  states.insert(states.end(), buffers_.begin(), buffers_.end());
  broadcast_from_rank0(ctx_, states);

  const int64_t bucket_bytes_cap = static_cast<int64_t>(cfg_.bucket_cap_mb * 1024 * 1024);
  std::vector<bool> expect_sparse(params_.size(), false);
  // As _ddp_init_helper with bucket_cap_mb left at its default: without find_unused_parameters the first iteration
  // uses one bucket; the Reducer rebuilds buckets (first 1 MiB, then bucket_bytes_cap) in gradient-ready order after
  // it. (The per-bucket limits compute_bucket_assignment_by_size returns are no longer the Reducer's to take.)
  std::vector<size_t> limits =
      searches_unused_parameters()
          ? std::vector<size_t>{static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(bucket_bytes_cap)}
          : std::vector<size_t>{static_cast<size_t>(LONG_MAX)};
  auto bucket_indices = std::get<0>(c10d::compute_bucket_assignment_by_size(params_, limits, expect_sparse));
  std::reverse(bucket_indices.begin(), bucket_indices.end());

  watch_gradients();  // before the Reducer: these hooks run before its own on each gradient
  reducer_ = std::make_shared<Reducer>(params_, bucket_indices, ctx_.group, expect_sparse, bucket_bytes_cap,
                                       cfg_.find_unused_parameters, cfg_.gradient_as_bucket_view,
                                       std::unordered_map<size_t, std::string>{}, kFirstBucketBytes,
                                       /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                       /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
  logger_ = std::make_shared<c10d::Logger>(reducer_);
  reducer_->set_logger(logger_);
  logger_->set_construction_data_and_log("ddptrain", {}, -1, cfg_.broadcast_buffers, false, cfg_.static_graph);
  if (cfg_.static_graph) {  // DDP's _set_static_graph
    reducer_->set_static_graph();
    logger_->set_static_graph();
  }
  if (cfg_.skip_zero_gradients) {
    if (!ctx_.device.is_cpu())
      throw std::runtime_error("dist.skip_zero_gradients works on CPU gradients, and this rank trains on " +
                               ctx_.device.str() + "; set it to false");
    auto hook = std::make_unique<SkipZeroGradientsHook>(ctx_.group, compressed_dtype(cfg_.grad_compression));
    skip_zero_hook_ = hook.get();
    reducer_->register_comm_hook(std::move(hook));
  } else if (cfg_.grad_compression == GradCompression::Fp16) {
    reducer_->register_builtin_comm_hook(c10d::BuiltinCommHookType::FP16_COMPRESS);
  } else if (cfg_.grad_compression == GradCompression::Bf16) {
    reducer_->register_comm_hook(std::make_unique<Bf16CompressHook>(ctx_.group));
  } else if (cfg_.grad_compression == GradCompression::PowerSgd) {
    powersgd_ = std::make_shared<PowerSgdState>(powersgd_options(cfg_));
    reducer_->register_comm_hook(std::make_unique<PowerSgdHook>(ctx_.group, powersgd_));
  }
  ctx_.activity->set_gradient_buckets(static_cast<int64_t>(bucket_indices.size()));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& [accumulator, key] : gradient_hooks_) accumulator->del_post_hook(key);
}

// The moment the last gradient of a synchronising backward is computed is when the Reducer launches the last
// bucket's all-reduce, from its own hook on that gradient, which may run the all-reduce there and then (a small
// one on the calling thread): a hook of ours on every gradient, registered first, counts them down to that moment.
void DistributedDataParallel::watch_gradients() {
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    TORCH_CHECK(accumulator, "DDP: a parameter without a gradient accumulator");
    const uintptr_t key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          gradient_computed(i);
          return outputs;
        }));
    gradient_hooks_.emplace_back(std::move(accumulator), key);
  }
}

void DistributedDataParallel::gradient_computed(size_t index) {
  if (gradients_pending_ == 0 || computed_[index]) return;
  computed_[index] = true;
  if (--gradients_pending_ == 0) all_gradients_computed();
}

void DistributedDataParallel::all_gradients_computed() {
  gradients_pending_ = 0;
  gradients_computed_at_ = std::chrono::steady_clock::now();
  ctx_.activity->enter(Phase::kGradientAllReduce);
}

c10d::Reducer& DistributedDataParallel::reducer() { return *reducer_; }

void DistributedDataParallel::sync_buffers() { broadcast_from_rank0(ctx_, buffers_); }

// Rank 0 logs the residuals' norm: at a logged step the hook adds up their squares as it forms them.
void DistributedDataParallel::begin_step(bool logged) {
  if (!powersgd_ || ctx_.rank != 0) return;
  std::lock_guard<std::mutex> lock(powersgd_->mutex);
  powersgd_->measure_residuals = logged;
  powersgd_->residual_squares.clear();  // the last step's buckets were all decompressed before its backward returned
}

// torch.amp.GradScaler skips the optimizer step whose gradients hold inf/NaN and the next one runs at a smaller scale;
// but the PowerSGD hook has by then formed its residuals and Qs from those gradients, and inf/NaN carried into every
// later step would have every later step skipped (PyTorch's powerSGD_hook under GradScaler does just that).
void DistributedDataParallel::step_done(const std::function<bool()>& skipped) {
  if (powersgd_ && (powersgd_->options.use_error_feedback || powersgd_->options.warm_start) && skipped())
    powersgd_start_over(*powersgd_);
}

// The Reducer refuses a forward while the last synchronising backward's buckets wait for gradients that never came
// (PyTorch: "Expected to have finished reduction in the prior iteration ..."): said here with the parameters' names.
void DistributedDataParallel::pre_forward(bool sync) {
  const bool grad = torch::GradMode::is_enabled();
  try {
    if (grad && sync) reducer_->prepare_for_forward();
    if (grad && !buckets_rebuilt_) rebuild_buckets();
  } catch (const c10::Error&) {
    std::vector<std::string> unused;
    for (size_t i = 0; i < params_.size(); ++i)
      if (!computed_.empty() && !computed_[i]) unused.push_back(param_names_[i]);
    if (cfg_.find_unused_parameters || unused.empty()) throw;
    std::string names;
    for (size_t i = 0; i < unused.size() && i < kNamedUnused; ++i) names += (i ? ", " : "") + unused[i];
    if (unused.size() > kNamedUnused) names += ", ... (" + std::to_string(unused.size()) + " in all)";
    throw std::runtime_error("DDP: the last synchronised backward computed no gradient for " + names +
                             " (the forward did not use them), so their buckets were never all-reduced; set "
                             "dist.find_unused_parameters = true (PyTorch DDP's find_unused_parameters=True)");
  }
  if (require_forward_param_sync_ && cfg_.broadcast_buffers && !buffers_.empty()) sync_buffers();
}

// The Reducer rebuilds its buckets once, in gradient-ready order, before the second forward. Gradients that are
// views of the old buckets (gradient_as_bucket_view) are copied into the new ones, so the old buckets stay alive
// until the last copy: for a moment every gradient exists twice (ResNet-18: +43 MiB peak RSS). Gradients that are
// exactly zero (zero_grad ran: the usual case) are first swapped for zero-strided zeros, which frees the old buckets
// before the new ones are allocated; the Reducer then fills the new views and re-points the gradients as always.
void DistributedDataParallel::rebuild_buckets() {
  if (!reducer_->rebuild_due()) return;
  if (cfg_.gradient_as_bucket_view) {
    torch::NoGradGuard no_grad;
    for (auto& p : params_) {
      auto& g = p.mutable_grad();
      if (g.defined() && all_bits_zero(g)) g = at::zeros({}, g.options()).expand(g.sizes());
    }
  }
  buckets_rebuilt_ = reducer_->rebuild_buckets();
  TORCH_CHECK(buckets_rebuilt_, "DDP: the Reducer did not rebuild its buckets when due");
  ctx_.activity->set_gradient_buckets(static_cast<int64_t>(bucket_sizes().size()));
}

void DistributedDataParallel::post_forward(bool sync, const torch::Tensor& output) {
  if (torch::GradMode::is_enabled() && sync) {
    require_forward_param_sync_ = true;
    if (skip_zero_hook_) skip_zero_sent_before_ = skip_zero_hook_->stats().elements_sent;
    reducer_->prepare_for_backward(searches_unused_parameters() ? std::vector<at::Tensor>{output}
                                                                : std::vector<at::Tensor>{});
    gradients_computed_at_.reset();
    gradients_pending_ = params_.size();
    computed_.assign(params_.size(), false);
    if (!output.requires_grad()) return;
    // Where some parameter gets no gradient (find_unused_parameters) the count never ends: then the moment is a
    // final callback of the autograd engine queued from the output's hook (among backward's first), so queued
    // before the Reducer's finalize_backward and run first: when only the wait for the all-reduces is left.
    // With static_graph the first backward (the config rules out a no_sync one) all-reduces every bucket at its end,
    // from a callback queued as DDP's _DDPSink queues Reducer::delay_all_reduce.
    const bool delay_all_reduce = cfg_.static_graph && !delay_all_reduce_queued_;
    delay_all_reduce_queued_ = delay_all_reduce_queued_ || delay_all_reduce;
    output.register_hook([this, delay_all_reduce](const torch::Tensor&) {
      auto& engine = torch::autograd::Engine::get_default_engine();
      engine.queue_callback([this] {
        if (!gradients_computed_at_) all_gradients_computed();
      });
      if (delay_all_reduce) engine.queue_callback([this] { reducer_->delay_all_reduce(); });
    });
  } else {
    require_forward_param_sync_ = false;
    gradients_pending_ = 0;
  }
}

std::optional<std::chrono::steady_clock::time_point> DistributedDataParallel::gradients_computed_at() const {
  return gradients_computed_at_;
}

std::optional<SkipZeroStats> DistributedDataParallel::skip_zero_stats() const {
  if (!skip_zero_hook_) return std::nullopt;
  return skip_zero_hook_->stats();
}

std::optional<SyncFigures> DistributedDataParallel::sync_figures() const {
  SyncFigures f;
  // Elements go to the all-reduces as the gradients are, or in the dtype fp16/bf16 compression sends.
  const std::optional<at::ScalarType> sent_as = compressed_dtype(cfg_.grad_compression);
  const auto element_bytes = static_cast<double>(c10::elementSize(sent_as.value_or(params_.front().scalar_type())));
  if (skip_zero_hook_) {
    f.bytes_sent = static_cast<double>(skip_zero_hook_->stats().elements_sent - skip_zero_sent_before_) * element_bytes;
    return f;
  }
  if (!powersgd_) {  // every bucket whole
    for (const auto& b : reducer_->get_grad_buckets(/*return_zero_tensors=*/false))
      f.bytes_sent += static_cast<double>(b.getBuffer().numel()) * element_bytes;
    return f;
  }
  std::lock_guard<std::mutex> lock(powersgd_->mutex);
  f.bytes_sent = static_cast<double>(powersgd_->elements_last_iter) * element_bytes;
  f.rate = powersgd_->numel_after_compression > 0 ? static_cast<double>(powersgd_->numel_before_compression) /
                                                        static_cast<double>(powersgd_->numel_after_compression)
                                                  : 0.0;
  if (ctx_.rank == 0) {  // rank 0's figure is the one logged
    double squares = 0;
    for (const auto& [index, residual] : powersgd_->error) {
      const auto added = powersgd_->residual_squares.find(index);
      if (added != powersgd_->residual_squares.end())
        squares += added->second;  // added up by the hook this step
      else
        squares += std::pow(residual.norm().item<double>(), 2);
    }
    f.residual_norm = std::sqrt(squares);
  }
  return f;
}

std::string DistributedDataParallel::summary() const {
  const auto s = skip_zero_stats();
  if (!s || s->elements == 0) return "";
  const double percent = 100.0 * static_cast<double>(s->elements_sent) / static_cast<double>(s->elements);
  return "dist.skip_zero_gradients: all-reduces sent " + number_text("%.1f%%", percent) +
         " of the gradient elements (" + std::to_string(s->gathered_buckets) +
         " bucket all-reduces of the non-zero positions, " + std::to_string(s->whole_buckets) + " of whole buckets; " +
         std::to_string(s->repeats) + " times a rank had non-zeros elsewhere and their positions were learnt and sent)";
}

std::vector<size_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<size_t> sizes;
  // The buckets' own gradient views: asking for zero tensors would allocate every gradient once more.
  for (const auto& b : reducer_->get_grad_buckets(/*return_zero_tensors=*/false))
    sizes.push_back(b.getParameters().size());
  return sizes;
}

std::unique_ptr<GradientSync> make_gradient_sync(std::shared_ptr<torch::nn::Module> module, const DistContext& ctx,
                                                 const DistConfig& cfg) {
  if (!ctx.distributed()) return std::make_unique<GradientSync>();
  return std::make_unique<DistributedDataParallel>(std::move(module), ctx, cfg);
}

}  // namespace ddp
