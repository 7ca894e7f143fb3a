// first_line: the first line of an error message (c10's carry a C++ backtrace below it), for one-line reports.
#pragma once

#include <string>

namespace ddp {

inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace ddp
