// process_env: environ copied into a map.
#include "base/process_env.h"

#include <unistd.h>

namespace ddp {

std::map<std::string, std::string> process_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace ddp
