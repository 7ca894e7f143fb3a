// model.name = "torchscript": a module saved from Python by torch.jit.save (scripted or traced), trained in C++.
// Its parameters and buffers are registered, the same tensors, in a tree of modules named as the script module's, so
// DDP, the optimizer, checkpoints and model.pt see them under the names its Python state_dict() gives.
#include "base/atomic_file.h"
#include "config/config.h"
#include "models/classifier.h"
#include "models/model_kind.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/script.h>

#include <cctype>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace ddp {
namespace {

// Whether a script module is one of torch.nn's normalisation layers that set_weight_decay's norm_classes hold
// (_BatchNorm, LayerNorm, GroupNorm, _InstanceNorm, LocalResponseNorm): TorchScript keeps the class's qualified name
// ("__torch__.torch.nn.modules.batchnorm.BatchNorm2d", a "___torch_mangle_N" atom inserted for a variant) but not
// its bases, so a user's subclass of one is not recognised.
bool is_torch_norm_layer(const torch::jit::Module& m) {
  static const std::unordered_set<std::string> kNormClasses = {
      "BatchNorm1d",        "BatchNorm2d",     "BatchNorm3d",        "SyncBatchNorm",
      "LazyBatchNorm1d",    "LazyBatchNorm2d", "LazyBatchNorm3d",    "InstanceNorm1d",
      "InstanceNorm2d",     "InstanceNorm3d",  "LazyInstanceNorm1d", "LazyInstanceNorm2d",
      "LazyInstanceNorm3d", "LayerNorm",       "GroupNorm",          "LocalResponseNorm"};
  const auto type = m.type()->name();
  return type && type->qualifiedName().rfind("__torch__.torch.nn.modules.", 0) == 0 &&
         kNormClasses.count(type->name()) > 0;
}

// Registers `from`'s own parameters and buffers in `into`, then its children as child modules, recursively
// (torch.nn.Module.state_dict's order: a module's parameters, its buffers, then each child's); adds the modules that
// mirror torch.nn's normalisation layers to `norm_layers`.
void mirror_module(const torch::jit::Module& from, torch::nn::Module& into,
                   std::unordered_set<const torch::nn::Module*>& norm_layers) {
  if (is_torch_norm_layer(from)) norm_layers.insert(&into);
  for (const auto& p : from.named_parameters(/*recurse=*/false))
    into.register_parameter(p.name, p.value, p.value.requires_grad());
  for (const auto& b : from.named_buffers(/*recurse=*/false))
    if (b.value.defined()) into.register_buffer(b.name, b.value);
  for (const auto& child : from.named_children()) {
    auto holder = std::make_shared<torch::nn::Module>(child.name);
    mirror_module(child.value, *holder, norm_layers);
    into.register_module(child.name, holder);
  }
}

class ScriptedClassifier : public Classifier {
 public:
  ScriptedClassifier(torch::jit::Module module, const ModelConfig& cfg)
      : module_(std::move(module)), path_(cfg.path), num_classes_(cfg.num_classes) {
    mirror_module(module_, *this, norm_layers_);
    refuse_tied_parameters(*this, path_);
    bool trainable = false;
    for (const auto& p : parameters()) trainable = trainable || p.requires_grad();
    if (!trainable) throw std::runtime_error(path_ + ": the module has no trainable parameters (model.path)");
    module_.train(is_training());
  }

  [[noreturn]] void forward_failed(const torch::Tensor& x, const std::string& why) const {
    std::string cause = why;
    while (!cause.empty() && std::isspace(static_cast<unsigned char>(cause.back()))) cause.pop_back();
    if (const size_t line = cause.rfind('\n'); line != std::string::npos) cause = cause.substr(line + 1);
    throw std::runtime_error(path_ + ": its forward failed on a batch of shape " + shape_text(x.sizes()) +
                             " (model.path; the module must take one image tensor [batch, channels, height, width]): " +
                             cause.substr(0, 400));
  }

  torch::Tensor forward(torch::Tensor x) override {
    c10::IValue out;
    try {
      // Op by op, as eager PyTorch runs the module in Python (autograd and autocast per operator), not through the
      // profiling executor's specialised, differentiated graphs.
      torch::jit::GraphOptimizerEnabledGuard eager(false);
      out = module_.forward({x});
    } catch (const c10::Error& e) {
      forward_failed(x, e.what_without_backtrace());
    } catch (const std::exception& e) {  // the interpreter's: its traceback, then the error on the last line
      forward_failed(x, e.what());
    }
    if (!out.isTensor())
      throw std::runtime_error(path_ + ": its forward returned " + out.tagKind() +
                               ", not a tensor of logits [batch, classes] (model.path)");
    torch::Tensor logits = out.toTensor();
    check_logits(logits, x, num_classes_, path_);
    return logits;
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);  // the script module's own flag, which its dropout and BatchNorm read
  }

  std::string head_name() const override { return ""; }

  bool is_norm_layer(const torch::nn::Module& m) const override { return norm_layers_.count(&m) > 0; }

  // A script module's BatchNorm layers run its compiled forward, which calls batch_norm itself: there is no layer to
  // swap for SyncBatchNorm (which TorchScript cannot compile either). Without BatchNorm there is nothing to convert.
  void synchronize_batchnorm(const c10::intrusive_ptr<BatchNormCollectives>& /*collectives*/) override {
    std::vector<std::string> names;
    for (const auto& m : module_.named_modules()) {
      const auto type = m.value.type()->name();
      if (type && type->name().find("BatchNorm") != std::string::npos) names.push_back(m.name);
    }
    if (names.empty()) return;
    std::string listed;
    for (size_t i = 0; i < names.size() && i < 5; ++i) listed += (i ? ", " : "") + names[i];
    if (names.size() > 5) listed += ", ... (" + std::to_string(names.size()) + " in all)";
    throw ConfigError("model.sync_batchnorm = true cannot convert the BatchNorm layers of the TorchScript module " +
                      path_ + " (" + listed +
                      "): their compiled forward calls batch_norm itself. Set model.sync_batchnorm = false, or train "
                      "a model without BatchNorm");
  }

  void write_scripted(AtomicFileSet& files, const std::string& path) const override {
    torch::jit::Module copy = module_.clone();
    copy.to(torch::kCPU);
    copy.eval();
    // What Module::save writes, replacing the file whole or not at all, with model.pt.
    files.write(path, [&](const ByteSink& sink) {
      torch::jit::ExportModule(copy, [&](const void* data, size_t size) {
        sink(data, size);
        return size;
      });
    });
  }

 private:
  static std::string shape_text(at::IntArrayRef sizes) { return c10::str(sizes); }  // "[2, 1, 28, 28]"

  torch::jit::Module module_;
  std::unordered_set<const torch::nn::Module*> norm_layers_;  // the mirrors of torch.nn's normalisation layers
  std::string path_;
  int64_t num_classes_;
};

// model.path's TorchScript module; throws naming the file when it is none or has nothing to train.
std::shared_ptr<Classifier> make_torchscript(const ModelConfig& cfg) {
  torch::jit::Module module;
  try {
    module = torch::jit::load(cfg.path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw std::runtime_error(cfg.path +
                             ": not a TorchScript module (model.path takes what torch.jit.save writes, "
                             "from torch.jit.script or torch.jit.trace): " +
                             std::string(e.what_without_backtrace()).substr(0, 200));
  }
  return std::make_shared<ScriptedClassifier>(std::move(module), cfg);
}

}  // namespace

// Its forward is the user's: it may change shapes or read the host (no CUDA graph), and its head is not known.
const ModelKind& torchscript_model() {
  static const ModelKind kind{{"torchscript", /*torchvision=*/"", "your module from Python (model.path)",
                               /*batch_norm=*/false, /*cuda_graph=*/false, /*head_known=*/false,
                               /*path=*/"the module torch.jit.save wrote"},
                              make_torchscript};
  return kind;
}

}  // namespace ddp
