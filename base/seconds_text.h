// seconds_text: a duration written as seconds the way users write dist.timeout_s ("2", "0.5", "300"), for messages.
#pragma once

#include <chrono>
#include <sstream>
#include <string>

namespace ddp {

inline std::string seconds_text(std::chrono::duration<double> d) {
  std::ostringstream os;
  os << d.count();
  return os.str();
}

}  // namespace ddp
