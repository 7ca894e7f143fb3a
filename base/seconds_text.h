// seconds_text: a duration written as seconds the way users write dist.timeout_s ("2", "0.5", "300"), for messages;
// seconds_since: the seconds a steady-clock time point lies back.
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

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace ddp
