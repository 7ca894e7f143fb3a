// A plugin whose factory throws: the message comes back through the C boundary as one error line.
#include <ddptrain/plugin_api.h>

#include <stdexcept>

namespace {

std::unique_ptr<ddptrain::PluginModel> refuse(const ddptrain::ModelOptions& options) {
  throw std::invalid_argument("this model takes 3 channels, not " + std::to_string(options.in_channels));
}

}  // namespace

DDPTRAIN_PLUGIN(refuse)
