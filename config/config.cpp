// The texts made of the config's declarations: --print-config, the resume comparison, --help, the key table of
// docs/configuration.md, and the did-you-mean matching of names.
#include "config/config.h"

#include "base/digest.h"
#include "config/key_walk.h"

#include <algorithm>
#include <sstream>

namespace ddp {
using namespace config_keys;
namespace {

// Every key (or those a resumed run must keep) as TOML sections.
std::string config_text(const Config& cfg, bool resume_keys_only) {
  std::ostringstream os;
  std::string open_section;
  for_each_key(cfg, [&](const char* section, const auto& field, const Key& key) {
    if (resume_keys_only && key.resume_may_change) return;
    if (open_section != section) os << (open_section.empty() ? "" : "\n") << "[" << section << "]\n";
    open_section = section;
    os << key.name << " = " << value_text(field) << "\n";
  });
  return os.str();
}

std::string padded(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string format_config(const Config& cfg) { return config_text(cfg, false); }
std::string format_resume_config(const Config& cfg) {
  // What the model does not read makes no different run: model.dropout beside a model without dropout (which every
  // config of ddptrain's earlier versions wrote as 0.5) compares as 0, as stochastic_depth beside one without it.
  Config compared = cfg;
  const ModelRow& row = model_row(cfg.model.name.name);
  if (row.dropout < 0) compared.model.dropout = 0;
  if (row.stochastic_depth < 0) compared.model.stochastic_depth = 0;
  return config_text(compared, true);
}
std::string config_digest(const std::string& config_text) { return sha256_hex(config_text); }

std::vector<KeyInfo> describe_keys(const Config& cfg) {
  std::vector<KeyInfo> out;
  for_each_key(cfg, [&](const char* section, const auto& field, const Key& key) {
    using T = std::decay_t<decltype(field)>;
    constexpr KeyKind kind = kind_of<T>();
    std::string allowed;
    if (kind == KeyKind::Choice)
      allowed = "one of: " + join(names_of<T>(), " | ") + (takes_a_path<T> ? " or a path" : "");
    if (kind == KeyKind::BoolOrAuto) allowed = "one of: true | false | auto";
    if (kind == KeyKind::Int || kind == KeyKind::Float || kind == KeyKind::Floats || kind == KeyKind::Ints ||
        kind == KeyKind::IntOrAuto)
      allowed = "range: " + range_text(key, kind) +
                (kind == KeyKind::Floats      ? ", one value or one per channel"
                 : kind == KeyKind::Ints      ? ", each"
                 : kind == KeyKind::IntOrAuto ? ", or auto"
                                              : "");
    out.push_back({section, key.name, kind, value_text(field), allowed, names_of<T>(), key.min, key.max, key.doc,
                   key.resume_may_change});
  });
  return out;
}

const char* kind_label(KeyKind kind) { return kind_text(kind).label; }

KeyKind override_kind(const std::string& path, const std::string& loc) {
  for (const RetiredKey& k : kRetiredKeys)
    if (path == k.path) return KeyKind::String;  // read and ignored, in either form of an override
  const auto [section, key] = key_names().override_target(path, loc, "");
  KeyKind kind = KeyKind::String;
  Config cfg;
  with_key(cfg, section, key, [&](const auto& field, const Key&) { kind = kind_of<std::decay_t<decltype(field)>>(); });
  return kind;
}

std::string config_help() {
  const std::vector<KeyInfo> keys = describe_keys(Config{});
  const std::vector<KeyInfo> resolved = describe_keys(parse_config("", "defaults"));
  size_t width = 0;
  for (const auto& k : keys) width = std::max(width, k.section.size() + 1 + k.name.size());
  std::ostringstream os;
  os << "config keys (TOML: [section] key = value; on the command line --section.key=value or --section.key value):\n";
  for (size_t i = 0; i < keys.size(); ++i) {
    const KeyInfo& k = keys[i];
    if (i == 0 || keys[i - 1].section != k.section) os << "\n[" << k.section << "]\n";
    std::string line = "  " + padded(k.section + "." + k.name, width + 2) + padded(kind_label(k.kind), 8);
    line += "default " + k.value;
    if (resolved[i].value != k.value) line += " (resolves to " + resolved[i].value + " with the other defaults)";
    if (!k.allowed.empty()) line += "  " + k.allowed;
    os << line << "\n";
  }
  return os.str();
}

std::string config_markdown() {
  std::ostringstream os;
  os << "| key | type | default | allowed | what it does |\n| --- | --- | --- | --- | --- |\n";
  for (const KeyInfo& k : describe_keys(Config{})) {
    std::string allowed = k.allowed;
    if (allowed.rfind("range: ", 0) == 0) allowed = allowed.substr(7);
    if (allowed.rfind("one of: ", 0) == 0) allowed = allowed.substr(8);
    std::string doc = k.doc;
    for (size_t at = 0; (at = doc.find('|', at)) != std::string::npos; at += 2) doc.replace(at, 1, "\\|");
    for (size_t at = 0; (at = allowed.find('|', at)) != std::string::npos; at += 2) allowed.replace(at, 1, "\\|");
    os << "| `" << k.section << "." << k.name << "` | " << kind_label(k.kind) << " | `" << k.value << "` | " << allowed
       << " | " << doc << (k.resume_may_differ ? " (may change on resume)" : "") << " |\n";
  }
  os << "\nRetired keys, still read (from a config file, an override or a checkpoint's config) and ignored:\n\n";
  for (const RetiredKey& k : kRetiredKeys) os << "- `" << k.path << "`: " << k.reason << "\n";
  return os.str();
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string closest_match(const std::string& name, const std::vector<std::string>& candidates) {
  // A near miss by edit distance, else a name that contains the other ("optim" -> "optimizer").
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::string best_near, best_containing;
  size_t near_distance = limit + 1, containing_distance = std::string::npos;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(name, c);
    if (d < near_distance) {
      near_distance = d;
      best_near = c;
    }
    const bool contains = name.size() >= 3 && (c.find(name) != std::string::npos || name.find(c) != std::string::npos);
    if (contains && d < containing_distance) {
      containing_distance = d;
      best_containing = c;
    }
  }
  return best_near.empty() ? best_containing : best_near;
}

}  // namespace ddp
