// A plugin whose ABI record says it was built against another LibTorch (the next minor version).
//
// The record is written by hand, as such a library's would be; its factory must never be called.
#include <ddptrain/plugin_api.h>

#include <cstdlib>

namespace {

ddptrain::PluginAbi next_minor_libtorch() {
  ddptrain::PluginAbi abi = ddptrain::plugin_abi();
  abi.torch_minor += 1;
  return abi;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ddptrain::PluginAbi ddptrain_plugin_abi = next_minor_libtorch();

extern "C" __attribute__((visibility("default"))) ddptrain::PluginModel* ddptrain_plugin_create(
    const ddptrain::ModelOptions*, char*, std::size_t) noexcept {
  std::abort();  // ddptrain compares the records before it calls the factory
}
