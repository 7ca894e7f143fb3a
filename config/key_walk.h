// Config keys walked and written: every section and key in file order, what each field's type is as a key, its
// value and allowed range as text, and the names of all of them for errors and did-you-mean hints. Shared by reading
// a config (config_load.cpp) and the texts made of it (config.cpp).
#pragma once

#include "base/number_text.h"
#include "config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ddp::config_keys {

// ---- The sections and their keys, in file order ------------------------------------------------------------------

// section(name, s) for each section of c (a Config or const Config) in file order.
template <class C, class F>
void for_each_section(C& c, F&& section) {
  section("job", c.job);
  section("data", c.data);
  section("model", c.model);
  section("optimizer", c.optimizer);
  section("lr_scheduler", c.lr_scheduler);
  section("training", c.training);
  section("amp", c.amp);
  section("dist", c.dist);
  section("checkpoint", c.checkpoint);
  section("metrics", c.metrics);
  section("profile", c.profile);
}

// f(section_name, field, key) for every key of cfg, in declaration order.
template <class C, class F>
void for_each_key(C& cfg, F&& f) {
  for_each_section(cfg, [&](const char* section, auto& s) {
    std::remove_const_t<std::remove_reference_t<decltype(s)>>::keys(
        s, [&](auto& field, const Key& key) { f(section, field, key); });
  });
}

// ---- What each C++ type of field is as a key --------------------------------------------------------------------

template <class T>
constexpr KeyKind kind_of() {
  if constexpr (std::is_same_v<T, bool>)
    return KeyKind::Bool;
  else if constexpr (std::is_same_v<T, int64_t>)
    return KeyKind::Int;
  else if constexpr (std::is_same_v<T, double>)
    return KeyKind::Float;
  else if constexpr (std::is_same_v<T, PerChannel>)
    return KeyKind::Floats;
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
    return KeyKind::Ints;
  else if constexpr (std::is_same_v<T, std::string>)
    return KeyKind::String;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return KeyKind::List;
  else if constexpr (std::is_same_v<T, IntOrAuto>)
    return KeyKind::IntOrAuto;
  else if constexpr (std::is_same_v<T, BoolOrAuto>)
    return KeyKind::BoolOrAuto;
  else
    return KeyKind::Choice;  // an enum of config/choices.h, ResumeFrom or a RowChoice
}

// Whether T holds a row's name (RowChoice: optimizer.name, model.name, data.dataset).
template <class T>
struct is_row_choice : std::false_type {};
template <class Row>
struct is_row_choice<RowChoice<Row>> : std::true_type {};

// A choice key's names (aliases included); ResumeFrom also takes any other value, as a path.
template <class T>
std::vector<std::string> names_of() {
  if constexpr (std::is_enum_v<T>)
    return choice_names<T>();
  else if constexpr (std::is_same_v<T, ResumeFrom>)
    return choice_names<ResumeMode>();
  else if constexpr (is_row_choice<T>::value)
    return row_names<typename T::RowType>();
  else
    return {};
}
template <class T>
constexpr bool takes_a_path = std::is_same_v<T, ResumeFrom>;

// Each kind of value once: its label in --help and the docs' key table, and what an error says a value must be.
struct KindText {
  KeyKind kind;
  const char* label;
  const char* must_be;
};
inline constexpr KindText kKindTexts[] = {
    {KeyKind::Bool, "bool", "a boolean (true/false)"},
    {KeyKind::Int, "int", "an integer"},
    {KeyKind::Float, "float", "a number"},
    {KeyKind::Floats, "floats", "a number or an array of numbers (one per image channel)"},
    {KeyKind::Ints, "ints", "an integer or an array of integers"},
    {KeyKind::String, "string", "a string"},
    {KeyKind::Choice, "choice", "a string"},
    {KeyKind::List, "list", "an array of strings"},
    {KeyKind::IntOrAuto, "int/auto", "an integer or \"auto\""},
    {KeyKind::BoolOrAuto, "bool/auto", "a boolean (true/false) or \"auto\""},
};

inline const KindText& kind_text(KeyKind k) {
  for (const KindText& t : kKindTexts)
    if (t.kind == k) return t;
  throw std::logic_error("config: a KeyKind without its text");
}

inline const char* kind_must_be(KeyKind k) { return kind_text(k).must_be; }

inline std::string format_number(double v) {
  std::string s = shortest_number(v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // a TOML float, not an integer
  return s;
}

inline std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", ch);
      out += esc;
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

// A value as TOML (64, 0.01, "net", true, ["a"]).
inline std::string value_text(bool v) { return v ? "true" : "false"; }
inline std::string value_text(int64_t v) { return std::to_string(v); }
inline std::string value_text(double v) { return format_number(v); }
// A TOML array of the items, each written by `text`.
template <class T, class F>
std::string array_text(const std::vector<T>& items, F&& text) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + text(items[i]);
  return out + "]";
}
inline std::string value_text(const PerChannel& values) {  // one value prints as a number, as a float key does
  return values.size() == 1 ? format_number(values[0]) : array_text(values, format_number);
}
inline std::string value_text(const std::vector<int64_t>& values) {
  return array_text(values, [](int64_t v) { return std::to_string(v); });
}
inline std::string value_text(const std::string& v) { return quoted(v); }
inline std::string value_text(const std::vector<std::string>& items) { return array_text(items, quoted); }
inline std::string value_text(const IntOrAuto& v) { return v.automatic ? quoted("auto") : std::to_string(v.value); }
inline std::string value_text(const BoolOrAuto& v) { return v.automatic ? quoted("auto") : value_text(v.value); }
inline std::string value_text(const ResumeFrom& r) {
  return quoted(r.mode == ResumeMode::Path ? r.path : choice_name(r.mode));
}
template <class Row>
std::string value_text(const RowChoice<Row>& c) {
  return quoted(c.name);
}
template <class E, class = std::enable_if_t<std::is_enum_v<E>>>
std::string value_text(E v) {
  return quoted(choice_name(v));
}

// The allowed range as errors and --help state it (">= 1 and <= 64", "-1.0 (the dataset's default) or > 0.0 and
// <= 1000.0"); "" when unbounded.
inline std::string range_text(const Key& k, KeyKind kind) {
  auto bound = [&](double b) {
    if (kind == KeyKind::Int || kind == KeyKind::Ints || kind == KeyKind::IntOrAuto)
      return std::to_string(static_cast<int64_t>(b));
    // Whole bounds as written in a config (604800.0, not 6.048e+05); others in the shortest form that reads back.
    if (std::fabs(b) < 1e15 && b == std::trunc(b)) return std::to_string(static_cast<int64_t>(b)) + ".0";
    return format_number(b);
  };
  std::string rule;
  if (std::isfinite(k.min)) rule = std::string(k.min_open ? "> " : ">= ") + bound(k.min);
  if (std::isfinite(k.max))
    rule += (rule.empty() ? "" : " and ") + std::string(k.max_open ? "< " : "<= ") + bound(k.max);
  if (k.default_marker) rule = bound(*k.default_marker) + " (" + k.marker_meaning + ") or " + rule;
  return rule;
}

// Calls f(field, key) for the key `section.name` of cfg; false when there is none.
template <class C, class F>
bool with_key(C& cfg, const std::string& section, const std::string& name, F&& f) {
  bool found = false;
  for_each_key(cfg, [&](const char* s, auto& field, const Key& key) {
    if (!found && section == s && name == key.name) {
      found = true;
      f(field, key);
    }
  });
  return found;
}

// The names of the sections and of each section's keys, for errors and did-you-mean hints.
struct KeyNames {
  std::vector<std::string> sections;
  std::map<std::string, std::vector<std::string>> keys;  // section -> its keys in order

  KeyNames() {
    const Config cfg;
    for_each_key(cfg, [&](const char* section, const auto&, const Key& key) {
      if (sections.empty() || sections.back() != section) sections.emplace_back(section);
      keys[section].emplace_back(key.name);
    });
  }
  bool has_section(const std::string& s) const { return keys.count(s) > 0; }
  bool has(const std::string& s, const std::string& k) const {
    auto it = keys.find(s);
    return it != keys.end() && std::find(it->second.begin(), it->second.end(), k) != it->second.end();
  }

  // "did you mean" for a key: the same key in another section, else a near miss within its section (when given),
  // else a near miss anywhere (as section.key).
  std::string key_hint(const std::string& section, const std::string& key) const {
    for (const auto& s : sections)
      if (s != section && has(s, key)) return s + "." + key;
    if (has_section(section)) {
      const std::string hint = closest_match(key, keys.at(section));
      if (!hint.empty()) return section + "." + hint;
    }
    std::vector<std::string> all;
    for (const auto& s : sections) all.insert(all.end(), keys.at(s).begin(), keys.at(s).end());
    const std::string hint = closest_match(key, all);
    if (hint.empty()) return "";
    for (const auto& s : sections)
      if (has(s, hint)) return s + "." + hint;
    return "";
  }
  std::string unknown_section(const std::string& name) const {
    std::string msg = "unknown section [" + name + "]";
    const std::string hint = closest_match(name, sections);
    return msg + (hint.empty() ? " (sections: " + join(sections) + ")" : "; did you mean [" + hint + "]?");
  }
  std::string unknown_key(const std::string& section, const std::string& key) const {
    std::string msg = "unknown key " + section + "." + key;
    const std::string hint = key_hint(section, key);
    return msg + (hint.empty() ? " (keys of [" + section + "]: " + join(keys.at(section)) + ")"
                               : "; did you mean " + hint + "?");
  }
  // The section and key an override's "section.key" names; a ConfigError prefixed `loc` (with a did-you-mean that
  // repeats `value_suffix`, "=VALUE" or "") when it names none.
  std::pair<std::string, std::string> override_target(const std::string& path, const std::string& loc,
                                                      const std::string& value_suffix) const {
    const size_t dot = path.find('.');
    if (dot == std::string::npos || path.find('.', dot + 1) != std::string::npos) {
      std::string msg = loc + ": an override must name section.key, got \"" + path + "\"";
      const size_t last_dot = path.rfind('.');
      const std::string hint = key_hint("", last_dot == std::string::npos ? path : path.substr(last_dot + 1));
      if (!hint.empty()) msg += "; did you mean --" + hint + value_suffix + "?";
      throw ConfigError(msg);
    }
    const std::string section = path.substr(0, dot), key = path.substr(dot + 1);
    if (!has_section(section)) throw ConfigError(loc + ": " + unknown_section(section));
    if (!has(section, key)) throw ConfigError(loc + ": " + unknown_key(section, key));
    return {section, key};
  }
};

inline const KeyNames& key_names() {
  static const KeyNames names;
  return names;
}

}  // namespace ddp::config_keys
