// model.name = "plugin": a LibTorch model from a shared library (model.library) written against models/plugin_api.h.
//
// The library's module is trained as it is: its parameters and buffers, the same tensors, are registered under its
// own names, so DDP, the optimizer, checkpoints and model.pt see the state dict the plugin's module gives.
#include "base/first_line.h"
#include "config/config.h"
#include "models/batch_norm.h"
#include "models/classifier.h"
#include "models/model_kind.h"
#include "models/plugin_api.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace ddp {
namespace {

std::string abi_text(const ddptrain::PluginAbi& a) {
  return "plugin API " + std::to_string(a.api_version) + ", LibTorch " + std::to_string(a.torch_major) + "." +
         std::to_string(a.torch_minor) + "." + std::to_string(a.torch_patch) +
         ", _GLIBCXX_USE_CXX11_ABI=" + std::to_string(a.cxx11_abi) +
         ", sizeof(torch::nn::Module)=" + std::to_string(a.module_size) +
         ", sizeof(PluginModel)=" + std::to_string(a.plugin_model_size) +
         ", sizeof(std::string)=" + std::to_string(a.string_size);
}

bool same_abi(const ddptrain::PluginAbi& a, const ddptrain::PluginAbi& b) {
  return a.api_version == b.api_version && a.torch_major == b.torch_major && a.torch_minor == b.torch_minor &&
         a.torch_patch == b.torch_patch && a.cxx11_abi == b.cxx11_abi && a.module_size == b.module_size &&
         a.plugin_model_size == b.plugin_model_size && a.string_size == b.string_size;
}

// dlerror's message, without the file name it starts with when it names the file.
std::string dl_error(const std::string& file) {
  const char* e = dlerror();
  const std::string message = e ? first_line(e) : "unknown error";
  return message.rfind(file + ": ", 0) == 0 ? message.substr(file.size() + 2) : message;
}

// The library at model.library, opened for as long as the process runs: the plugin's code and vtables live in it, so
// it is never closed (opening it again, for an EMA copy, returns the same handle).
void* open_library(const std::string& library) {
  // dlopen searches the library path for a name without a slash; model.library, like model.path, names a file
  // relative to the working directory.
  const std::string file = library.find('/') == std::string::npos ? "./" + library : library;
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw std::runtime_error(library + ": cannot load the plugin library (model.library): " + dl_error(file));
  return handle;
}

void* plugin_symbol(void* handle, const char* name, const std::string& library) {
  dlerror();
  void* s = dlsym(handle, name);
  if (!s)
    throw std::runtime_error(library + ": not a ddptrain plugin: it exports no " + name +
                             " (a plugin writes DDPTRAIN_PLUGIN(factory) once, from ddptrain/plugin_api.h)");
  return s;
}

class PluginClassifier : public Classifier {
 public:
  PluginClassifier(std::shared_ptr<ddptrain::PluginModel> plugin, const ModelConfig& cfg)
      : plugin_(std::move(plugin)), library_(cfg.library), num_classes_(cfg.num_classes) {
    for (const auto& p : plugin_->named_parameters(/*recurse=*/false))
      register_parameter(p.key(), p.value(), p.value().requires_grad());
    for (const auto& b : plugin_->named_buffers(/*recurse=*/false)) register_buffer(b.key(), b.value());
    for (const auto& child : plugin_->named_children()) register_module(child.key(), child.value());
    refuse_tied_parameters(*this, library_);
    bool trainable = false;
    for (const auto& p : parameters()) trainable = trainable || p.requires_grad();
    if (!trainable) throw std::runtime_error(library_ + ": the plugin's model has no trainable parameters");
    const std::string head = plugin_->head_name();
    if (cfg.reset_head && head.empty())
      throw ConfigError(library_ + ": model.reset_head needs the model's head, and the plugin's head_name() is \"\"");
    if (!head.empty() && !named_modules("", /*include_self=*/false).contains(head))
      throw std::runtime_error(library_ + ": the plugin's head_name() \"" + head + "\" is no module of its model");
    plugin_->train(is_training());
  }

  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor logits;
    try {
      logits = plugin_->forward(x);
    } catch (const c10::Error& e) {
      throw std::runtime_error(library_ + ": the plugin's forward failed: " + first_line(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw std::runtime_error(library_ + ": the plugin's forward failed: " + first_line(e.what()));
    }
    check_logits(logits, x, num_classes_, library_);
    return logits;
  }

  void train(bool on) override {
    torch::nn::Module::train(on);  // the plugin's children are this module's
    plugin_->train(on);            // and its own flag, which its forward may read
  }

  std::string head_name() const override { return plugin_->head_name(); }

  // The plugin's forward calls PluginModel::batch_norm for each BatchNorm2d layer: routed through BatchNormLayers,
  // which runs torch.nn.SyncBatchNorm's forward in training.
  void synchronize_batchnorm(const c10::intrusive_ptr<BatchNormCollectives>& collectives) override {
    bn_layers_->synchronize(collectives);
    plugin_->set_batch_norm([layers = bn_layers_](torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& input) {
      return layers->forward(bn, input);
    });
  }

 private:
  std::shared_ptr<ddptrain::PluginModel> plugin_;
  std::shared_ptr<BatchNormLayers> bn_layers_ = std::make_shared<BatchNormLayers>();
  std::string library_;
  int64_t num_classes_;
};

// model.library's model; throws naming the file when it is no plugin, was built for another ABI, or its factory
// fails.
std::shared_ptr<Classifier> make_plugin(const ModelConfig& cfg) {
  const std::string& library = cfg.library;
  void* handle = open_library(library);
  const auto* abi = static_cast<const ddptrain::PluginAbi*>(plugin_symbol(handle, DDPTRAIN_PLUGIN_ABI_SYMBOL, library));
  const auto create =
      reinterpret_cast<ddptrain_plugin_create_fn>(plugin_symbol(handle, DDPTRAIN_PLUGIN_CREATE_SYMBOL, library));
  constexpr ddptrain::PluginAbi own = ddptrain::plugin_abi();
  if (abi->api_version != own.api_version)  // the other fields may be laid out differently
    throw std::runtime_error(library + ": the plugin was built for plugin API " + std::to_string(abi->api_version) +
                             ", this ddptrain reads plugin API " + std::to_string(own.api_version) +
                             "; rebuild it against this ddptrain's ddptrain/plugin_api.h");
  if (!same_abi(*abi, own))
    throw std::runtime_error(library + ": the plugin was built for " + abi_text(*abi) + "; this ddptrain has " +
                             abi_text(own) + ": rebuild it against this ddptrain's LibTorch");
  ddptrain::ModelOptions options;
  options.in_channels = cfg.in_channels;
  options.num_classes = cfg.num_classes;
  options.image_size = cfg.image_size;
  options.dropout = cfg.dropout;
  options.stochastic_depth = cfg.stochastic_depth;
  char error[1024] = "";
  ddptrain::PluginModel* model = create(&options, error, sizeof error);
  if (!model) throw std::runtime_error(library + ": the plugin's factory failed: " + first_line(error));
  return std::make_shared<PluginClassifier>(std::shared_ptr<ddptrain::PluginModel>(model), cfg);
}

}  // namespace

// Its forward is the user's: it may change shapes or read the host (no CUDA graph); it names its head itself.
const ModelKind& plugin_model() {
  static const ModelKind kind{
      {"plugin", /*torchvision=*/"", "your LibTorch model from a shared library (model.library)",
       /*batch_norm=*/true, /*cuda_graph=*/false, /*head_known=*/true, /*path=*/"",
       /*dropout=*/0, /*stochastic_depth=*/0,
       /*library=*/"a shared library built against ddptrain/plugin_api.h (docs/plugins.md)"},
      make_plugin};
  return kind;
}

}  // namespace ddp
