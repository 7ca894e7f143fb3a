// GradientSync: what a training step asks of gradient synchronisation; a world of one gets the kind that does nothing.
#pragma once

#include "config/config.h"
#include "distributed/context.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ddp {

// What a gradient synchronisation reports of the last synchronising step.
struct SyncFigures {
  double bytes_sent = 0;                // gradient bytes handed to all-reduces
  std::optional<double> rate;           // PowerSGD: elements before over after compression so far; 0 before it starts
  std::optional<double> residual_norm;  // PowerSGD: L2 norm of the error-feedback residuals; 0 without them
};

// The no-op kind is this class itself: one process has no replicas to keep in step.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Before a step's first forward: `logged` says whether sync_figures() is asked for once the step is done.
  virtual void begin_step(bool logged) {}
  // After the step's optimizer update or its skip: `skipped()` says whether the update was skipped for inf/NaN
  // gradients (a loss scaler's verdict, or training.on_nonfinite = "skip"). It may read the device, so only a kind that
  // carries state from one step into the next asks it.
  virtual void step_done(const std::function<bool()>& skipped) {}
  // Before the module's forward. sync=false is no_sync(): this micro-step's gradients stay local.
  virtual void pre_forward(bool sync) {}
  // After the module's forward, before backward (output: for find_unused_parameters' graph walk).
  virtual void post_forward(bool sync, const torch::Tensor& output) {}
  // Broadcasts buffers (BatchNorm running stats) from rank 0, e.g. before evaluation.
  virtual void sync_buffers() {}
  // When the last synchronised backward had computed every gradient: from then until backward returns, it waited
  // for the gradient all-reduce. None here: nothing is waited for.
  virtual std::optional<std::chrono::steady_clock::time_point> gradients_computed_at() const { return std::nullopt; }
  // The synchronisation's figures of the last synchronising step (this rank's); none here.
  virtual std::optional<SyncFigures> sync_figures() const { return std::nullopt; }
  // A line for the end of the run about what the synchronisation saved; empty when there is nothing to say.
  virtual std::string summary() const { return ""; }
  // Checkpoint entries of the synchronisation's own state (collective: every rank calls it); none here.
  virtual void state_dict(c10::impl::GenericDict& out) {}
  // Restores them before the first step of a resumed run; a checkpoint without them leaves the fresh state. Returns
  // a warning naming what could not be restored as it was, or "".
  virtual std::string load_state_dict(const c10::impl::GenericDict& state) { return ""; }
};

// DistributedDataParallel (distributed/ddp.h) for a world of more than one, else the no-op GradientSync.
std::unique_ptr<GradientSync> make_gradient_sync(std::shared_ptr<torch::nn::Module> module, const DistContext& ctx,
                                                 const DistConfig& cfg);

}  // namespace ddp
