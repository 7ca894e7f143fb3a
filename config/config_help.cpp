// ddptrain --help's key reference, generated from the config schema (types, defaults, ranges and choices).
#include "config/config_help.h"

#include "config/config.h"
#include "config/config_schema.h"

#include <algorithm>
#include <sstream>

namespace ddp {
namespace {

std::string allowed_values(const FieldSpec& f) {
  if (f.kind == FieldKind::Choice) return "one of: " + join(f.choices, " | ") + (f.choice_or_path ? " or a path" : "");
  const std::string range = range_text(f);
  return range.empty() ? "" : "range: " + range;
}

std::string padded(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string config_help() {
  Config defaults;
  Config resolved = parse_config("", "defaults");
  auto schema = config_schema(defaults);
  auto resolved_schema = config_schema(resolved);
  size_t name_width = 0;
  for (const auto& s : schema)
    for (const auto& f : s.fields) name_width = std::max(name_width, s.name.size() + 1 + f.key.size());
  std::ostringstream os;
  os << "config keys (TOML: [section] key = value; on the command line --section.key=value or --section.key value):\n";
  for (size_t i = 0; i < schema.size(); ++i) {
    os << "\n[" << schema[i].name << "]\n";
    for (size_t j = 0; j < schema[i].fields.size(); ++j) {
      const FieldSpec& f = schema[i].fields[j];
      std::string line = "  " + padded(schema[i].name + "." + f.key, name_width + 2) + padded(kind_label(f.kind), 8);
      std::string value = format_field_value(f), after = format_field_value(resolved_schema[i].fields[j]);
      line += "default " + value;
      if (after != value) line += " (resolves to " + after + " with the other defaults)";
      std::string allowed = allowed_values(f);
      if (!allowed.empty()) line += "  " + allowed;
      os << line << "\n";
    }
  }
  return os.str();
}

}  // namespace ddp
