// Numbers as text: shortest_number (the shortest decimal text that reads back to the same double, %g style, via
// std::to_chars) and number_text (one number in a printf format, for what people read).
#pragma once

#include <charconv>
#include <cstdio>
#include <string>

namespace ddp {

// 0.1 -> "0.1", 1e-05 -> "1e-05", 3 -> "3"; inf and nan as "inf", "-inf", "nan".
inline std::string shortest_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, r.ptr);
}

// number_text("%.1f%%", 12.34) -> "12.3%". `format` takes one double.
inline std::string number_text(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace ddp
