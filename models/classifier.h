// Classifier: the interface every model implements (a Module whose forward maps images to class scores).
#pragma once

#include "base/atomic_file.h"

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

namespace ddp {

struct ModelConfig;
class BatchNormCollectives;

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // true: forward returns log-probabilities (loss = NLL); false: logits (loss = cross-entropy).
  virtual bool outputs_log_probs() const { return false; }
  // The fewest samples a training (train-mode) forward takes on image_size x image_size inputs: 2 where BatchNorm
  // would see one value per channel (it needs more than one to compute a batch variance), else 1.
  virtual int64_t min_training_batch(int64_t /*image_size*/) const { return 1; }
  // The module that maps features to class scores (torchvision's ResNets: "fc"), which fine-tuning re-initialises.
  virtual std::string head_name() const = 0;
  // A TorchScript model: the module itself as torch.jit.save writes it, added to `files` as PATH; other models write
  // nothing.
  virtual void write_scripted(AtomicFileSet& /*files*/, const std::string& /*path*/) const {}
  // model.sync_batchnorm, as torch.nn.SyncBatchNorm.convert_sync_batchnorm: the BatchNorm layers normalise over
  // every rank's batch in training (a model without BatchNorm has nothing to convert); throws a ConfigError naming
  // the layers it cannot convert.
  virtual void synchronize_batchnorm(const c10::intrusive_ptr<BatchNormCollectives>& /*collectives*/) {}
  // Whether `m`, a module of this model's tree, is a normalisation layer as the norm_classes of torchvision's
  // set_weight_decay count them (torch.nn's _BatchNorm, LayerNorm, GroupNorm, _InstanceNorm, LocalResponseNorm):
  // optimizer.norm_weight_decay's param group. By default LibTorch's BatchNorm1d/2d/3d (a built-in model's
  // model.sync_batchnorm layers among them), InstanceNorm1d/2d/3d, LayerNorm, GroupNorm and LocalResponseNorm.
  virtual bool is_norm_layer(const torch::nn::Module& m) const;
};

// Builds model.name (its row's factory, models/model_kind.h); parameters are initialised from the global CPU generator
// (seed it first).
std::shared_ptr<Classifier> make_model(const ModelConfig& cfg);

// Throws naming `source` (the file the model came from) unless `logits` are [images.size(0), num_classes].
void check_logits(const torch::Tensor& logits, const torch::Tensor& images, int64_t num_classes,
                  const std::string& source);

// Throws naming `source` (the file the model came from) where two parameter names hold one tensor (tied weights):
// LibTorch lists such a tensor under each name, where torch.nn.Module.parameters() lists it once.
void refuse_tied_parameters(const torch::nn::Module& m, const std::string& source);

// Number of trainable parameters.
int64_t count_parameters(const torch::nn::Module& m);

}  // namespace ddp
