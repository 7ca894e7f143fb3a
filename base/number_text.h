// shortest_number: the shortest decimal text that reads back to the same double (%g style, via std::to_chars).
#pragma once

#include <charconv>
#include <string>

namespace ddp {

// 0.1 -> "0.1", 1e-05 -> "1e-05", 3 -> "3"; inf and nan as "inf", "-inf", "nan".
inline std::string shortest_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, r.ptr);
}

}  // namespace ddp
