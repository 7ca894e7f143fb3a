// Config schema: the table of sections and keys, with type, allowed range or choices, bound to a Config.
#pragma once

#include "config/config.h"

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

enum class FieldKind { Bool, Int, Float, String, Choice, StringList };

struct FieldSpec {
  std::string key;
  FieldKind kind;
  void* target;                       // bool*, int64_t*, double*, std::string*, std::vector<std::string>*; Choice: E*
  std::vector<std::string> choices;   // Choice: allowed names (ChoiceTable<E>)
  bool choice_or_path = false;        // Choice: any other value is accepted as a file path
  std::function<bool(const std::string&)> set_choice;  // Choice: stores the value a name stands for (false: none)
  std::function<std::string()> choice_text;            // Choice: the current value's name (or path)
  double min = -std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  double max = std::numeric_limits<double>::infinity();
  bool max_exclusive = false;
  std::optional<double> default_marker;  // Float: also accepted outside the range, meaning "the dataset's default"
  bool nonempty = false;                  // String: "" is refused
};

struct SectionSpec {
  std::string name;
  std::vector<FieldSpec> fields;
  const FieldSpec* find(const std::string& key) const;
};

// The schema with every field pointing into cfg (cfg must outlive the result).
std::vector<SectionSpec> config_schema(Config& cfg);

// A field's current value as --print-config writes it (TOML: 64, 0.01, "net", true, ["a"]).
std::string format_field_value(const FieldSpec& f);
// The allowed range as error messages and --help state it (">= 1 and <= 64", "-1.0 (the dataset's default) or > 0.0
// and <= 1000.0"); "" when unbounded.
std::string range_text(const FieldSpec& f);
// The short type name --help shows: bool, int, float, string, choice, list.
const char* kind_label(FieldKind kind);
// The kind of the key an override names ("section.key"); a ConfigError prefixed `loc`, with the closest key as a
// did-you-mean, when the schema has no such key.
FieldKind override_kind(const std::string& path, const std::string& loc);

// "a, b, c" for error messages.
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");
// The candidate closest to name (edit distance), or "" when none is close enough to suggest.
std::string closest_match(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace ddp
