// python_kind: an IValue described the way a Python user would name it.
#include "base/python_kind.h"

namespace ddp {

std::string python_kind(const c10::IValue& v) {
  if (v.isTensor()) return "a tensor";
  if (v.isGenericDict()) return "a dict";
  if (v.isList()) return "a list";
  if (v.isTuple()) return "a tuple";
  if (v.isString()) return "a str";
  if (v.isInt()) return "an int";
  if (v.isDouble()) return "a float";
  if (v.isBool()) return "a bool";
  if (v.isNone()) return "None";
  return "a " + v.tagKind();
}

}  // namespace ddp
