// The plugin interface, installed as ddptrain/plugin_api.h: PluginModel, ModelOptions, DDPTRAIN_PLUGIN(factory).
//
// A plugin is a LibTorch model built as a shared library that model.name = "plugin" loads from model.library. This
// header needs LibTorch and nothing else of ddptrain.
//
// A plugin defines a PluginModel subclass and a factory, and writes DDPTRAIN_PLUGIN(factory) once:
//
//   struct MyNet : ddptrain::PluginModel {
//     explicit MyNet(const ddptrain::ModelOptions& o) { ... register_module(...) ... }
//     torch::Tensor forward(torch::Tensor images) override { ... batch_norm(bn1, x) ... }
//     std::string head_name() const override { return "fc"; }
//   };
//   std::unique_ptr<ddptrain::PluginModel> make(const ddptrain::ModelOptions& o) {
//     return std::make_unique<MyNet>(o);
//   }
//   DDPTRAIN_PLUGIN(make)
//
// The library is code that runs with the rights of whoever runs ddptrain, as a TorchScript file's code does.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/types.h>
#include <torch/version.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace ddptrain {

// Raised whenever ModelOptions, PluginAbi, PluginModel or the factory's signature change.
constexpr std::uint32_t kPluginApiVersion = 1;

// What the run's config says of the model ([model] and [data]), model defaults resolved.
struct ModelOptions {
  std::int64_t in_channels = 1;   // model.in_channels: channels of the input images
  std::int64_t num_classes = 10;  // model.num_classes: columns of the logits forward returns
  std::int64_t image_size = 28;   // data.image_size (training and evaluation crops may differ: data.*_crop_size)
  double dropout = 0;             // model.dropout (unset: 0)
  double stochastic_depth = 0;    // model.stochastic_depth (unset: 0)
};

// The module ddptrain trains. Its parameters and buffers are the model's state dict under the names this module
// gives them (register_parameter, register_buffer, register_module), as torch.nn.Module.state_dict names them.
class PluginModel : public torch::nn::Module {
 public:
  using BatchNormFunction = std::function<torch::Tensor(torch::nn::BatchNorm2dImpl&, const torch::Tensor&)>;

  // Logits [batch, num_classes] of images [batch, in_channels, height, width].
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  // The module that maps features to class scores, which model.reset_head re-initialises; "": none (refused).
  virtual std::string head_name() const { return ""; }

  // Set by ddptrain (model.sync_batchnorm: torch.nn.SyncBatchNorm's statistics over every rank's batch).
  void set_batch_norm(BatchNormFunction f) { batch_norm_ = std::move(f); }

 protected:
  // What forward calls instead of bn->forward(x), so that model.sync_batchnorm reaches the layer.
  torch::Tensor batch_norm(torch::nn::BatchNorm2d& bn, const torch::Tensor& x) {
    return batch_norm_ ? batch_norm_(*bn, x) : bn->forward(x);
  }

 private:
  BatchNormFunction batch_norm_;
};

// What the plugin was compiled against; ddptrain loads it only where every field equals its own.
struct PluginAbi {
  std::uint32_t api_version;
  std::uint32_t torch_major, torch_minor, torch_patch;  // torch/version.h
  std::uint32_t cxx11_abi;                              // _GLIBCXX_USE_CXX11_ABI
  std::uint32_t module_size;                            // sizeof(torch::nn::Module)
  std::uint32_t plugin_model_size;                      // sizeof(PluginModel)
  std::uint32_t string_size;                            // sizeof(std::string)
};

inline constexpr PluginAbi plugin_abi() {
  return {kPluginApiVersion,         TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH,
#ifdef _GLIBCXX_USE_CXX11_ABI
          _GLIBCXX_USE_CXX11_ABI,
#else
          2,  // not libstdc++
#endif
          sizeof(torch::nn::Module), sizeof(PluginModel), sizeof(std::string)};
}

using PluginFactory = std::unique_ptr<PluginModel> (*)(const ModelOptions&);

// The factory behind the exported symbol: never lets an exception cross the C boundary; its message goes into
// `error` (truncated to error_size, NUL-terminated) and the result is null.
inline PluginModel* create_plugin_model(PluginFactory factory, const ModelOptions* options, char* error,
                                        std::size_t error_size) noexcept {
  auto say = [&](const char* what) {
    if (error_size == 0) return;
    std::strncpy(error, what, error_size - 1);
    error[error_size - 1] = '\0';
  };
  try {
    std::unique_ptr<PluginModel> model = factory(*options);
    if (!model) say("the factory returned no model");
    return model.release();
  } catch (const c10::Error& e) {
    say(e.what_without_backtrace());
  } catch (const std::exception& e) {
    say(e.what());
  } catch (...) {
    say("the factory threw something that is not a std::exception");
  }
  return nullptr;
}

}  // namespace ddptrain

// The two symbols ddptrain looks up in the library.
#define DDPTRAIN_PLUGIN_ABI_SYMBOL "ddptrain_plugin_abi"
#define DDPTRAIN_PLUGIN_CREATE_SYMBOL "ddptrain_plugin_create"
using ddptrain_plugin_create_fn = ddptrain::PluginModel* (*)(const ddptrain::ModelOptions*, char*, std::size_t);

// Exports `factory` (a function of const ddptrain::ModelOptions& returning a std::unique_ptr to a PluginModel or
// subclass) and the ABI record of this compilation; written once, at namespace scope, in one source file of the plugin.
#define DDPTRAIN_PLUGIN(factory)                                                                                       \
  extern "C" __attribute__((visibility("default"))) const ddptrain::PluginAbi ddptrain_plugin_abi =                    \
      ddptrain::plugin_abi();                                                                                          \
  extern "C" __attribute__((visibility("default"))) ddptrain::PluginModel* ddptrain_plugin_create(                     \
      const ddptrain::ModelOptions* options, char* error, std::size_t error_size) noexcept {                           \
    return ddptrain::create_plugin_model(                                                                              \
        [](const ddptrain::ModelOptions& o) -> std::unique_ptr<ddptrain::PluginModel> { return factory(o); }, options, \
        error, error_size);                                                                                            \
  }
