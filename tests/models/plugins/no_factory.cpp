// A library with the plugin ABI record but no factory: model.library refuses it, naming the missing symbol.
#include <ddptrain/plugin_api.h>

extern "C" __attribute__((visibility("default"))) const ddptrain::PluginAbi ddptrain_plugin_abi =
    ddptrain::plugin_abi();
