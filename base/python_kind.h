// python_kind: an IValue described the way a Python user would name it ("a list", "an int", "None").
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace ddp {

// What a Python user would call the value: "a list", "an int", "a str", "None", ...
std::string python_kind(const c10::IValue& v);

}  // namespace ddp
