// Strict TOML config loading (file + --section.key=value overrides), validation and printing.
#include "config/config.h"

#include "config/config_schema.h"

#include "base/number_text.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <map>
#include <tuple>
#include <iomanip>
#include <sstream>

namespace ddp {
namespace {

std::string where(const std::string& source, const toml::source_region& r) {
  std::ostringstream os;
  os << source << ":" << (r.begin.line ? r.begin.line : 1) << ":" << (r.begin.column ? r.begin.column : 1);
  return os.str();
}

std::string format_number(double v);

// Errors are one line: newlines (in a toml++ description or an override's text) become spaces.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string describe(const toml::node& n) {
  std::ostringstream os;
  switch (n.type()) {
    case toml::node_type::string: return "string \"" + *n.value<std::string>() + "\"";
    case toml::node_type::integer: os << "integer " << *n.value<int64_t>(); return os.str();
    case toml::node_type::floating_point: return "float " + format_number(*n.value<double>());
    case toml::node_type::boolean: return std::string("boolean ") + (*n.value<bool>() ? "true" : "false");
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

std::string format_number(double v) {
  std::string s = shortest_number(v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // a TOML float, not an integer
  return s;
}

const char* kind_name(FieldKind k) {
  switch (k) {
    case FieldKind::Bool: return "a boolean (true/false)";
    case FieldKind::Int: return "an integer";
    case FieldKind::Float: return "a number";
    case FieldKind::StringList: return "an array of strings";
    default: return "a string";
  }
}

// Applies one TOML value to a field; `loc` prefixes every error.
void assign(const SectionSpec& section, const FieldSpec& f, const toml::node& v, const std::string& loc) {
  const std::string name = section.name + "." + f.key;
  auto type_error = [&] {
    return ConfigError(loc + ": " + name + " must be " + kind_name(f.kind) + ", got " + describe(v));
  };
  auto out_of_range = [&](const std::string& shown) {
    return ConfigError(loc + ": " + name + " must be " + range_text(f) + ", got " + shown);
  };
  switch (f.kind) {
    case FieldKind::Bool:
      if (!v.is_boolean()) throw type_error();
      *static_cast<bool*>(f.target) = *v.value<bool>();
      break;
    case FieldKind::Int: {
      if (!v.is_integer()) throw type_error();
      int64_t x = *v.value<int64_t>();
      // Compared as integers: near 2^63 a double cannot tell neighbouring int64 values apart.
      if (x < static_cast<int64_t>(f.min) || x > static_cast<int64_t>(f.max)) throw out_of_range(std::to_string(x));
      *static_cast<int64_t*>(f.target) = x;
      break;
    }
    case FieldKind::Float: {
      if (!v.is_number()) throw type_error();
      double x = *v.value<double>();
      if (!std::isfinite(x)) throw ConfigError(loc + ": " + name + " must be a finite number, got " + format_number(x));
      const bool low = f.min_exclusive ? !(x > f.min) : !(x >= f.min);
      const bool high = f.max_exclusive ? !(x < f.max) : !(x <= f.max);
      if ((low || high) && x != f.default_marker) throw out_of_range(format_number(x));
      *static_cast<double*>(f.target) = x;
      break;
    }
    case FieldKind::String:
      if (!v.is_string()) throw type_error();
      if (f.nonempty && v.value<std::string>()->empty())
        throw ConfigError(loc + ": " + name + " must not be empty");
      *static_cast<std::string*>(f.target) = *v.value<std::string>();
      break;
    case FieldKind::Choice: {
      if (!v.is_string()) throw type_error();
      const std::string s = *v.value<std::string>();
      if (!f.set_choice(s)) {
        std::string msg = loc + ": " + name + " must be one of " + join(f.choices, ", ") +
                          (f.choice_or_path ? " or a path" : "") + ", got \"" + s + "\"";
        std::string hint = closest_match(s, f.choices);
        if (!hint.empty()) msg += "; did you mean \"" + hint + "\"?";
        throw ConfigError(msg);
      }
      break;
    }
    case FieldKind::StringList: {
      auto* out = static_cast<std::vector<std::string>*>(f.target);
      if (v.is_string()) {
        *out = {*v.value<std::string>()};
        break;
      }
      const toml::array* arr = v.as_array();
      if (!arr) throw type_error();
      std::vector<std::string> items;
      for (const auto& e : *arr) {
        if (!e.is_string()) throw ConfigError(loc + ": " + name + " must be an array of strings, got " + describe(e));
        items.push_back(*e.value<std::string>());
      }
      *out = items;
      break;
    }
  }
}

std::vector<std::string> section_names(const std::vector<SectionSpec>& schema) {
  std::vector<std::string> names;
  for (const auto& s : schema) names.push_back(s.name);
  return names;
}

std::vector<std::string> key_names(const SectionSpec& s) {
  std::vector<std::string> names;
  for (const auto& f : s.fields) names.push_back(f.key);
  return names;
}

const SectionSpec* find_section(const std::vector<SectionSpec>& schema, const std::string& name) {
  for (const auto& s : schema)
    if (s.name == name) return &s;
  return nullptr;
}

// "did you mean" for a key: the same key in another section, else a near miss within its section,
// else a near miss anywhere (as section.key).
std::string key_hint(const std::vector<SectionSpec>& schema, const SectionSpec* section, const std::string& key) {
  for (const auto& s : schema)
    if (&s != section && s.find(key)) return s.name + "." + key;
  if (section) {
    std::string hint = closest_match(key, key_names(*section));
    if (!hint.empty()) return section->name + "." + hint;
  }
  std::vector<std::string> all;
  for (const auto& s : schema)
    for (const auto& f : s.fields) all.push_back(f.key);
  std::string hint = closest_match(key, all);
  if (hint.empty()) return "";
  for (const auto& s : schema)
    if (s.find(hint)) return s.name + "." + hint;
  return "";
}

std::string unknown_section_message(const std::vector<SectionSpec>& schema, const std::string& name) {
  std::string msg = "unknown section [" + name + "]";
  std::string hint = closest_match(name, section_names(schema));
  if (!hint.empty()) msg += "; did you mean [" + hint + "]?";
  else msg += " (sections: " + join(section_names(schema)) + ")";
  return msg;
}

std::string unknown_key_message(const std::vector<SectionSpec>& schema, const SectionSpec& s, const std::string& key) {
  std::string msg = "unknown key " + s.name + "." + key;
  std::string hint = key_hint(schema, &s, key);
  if (!hint.empty()) msg += "; did you mean " + hint + "?";
  else msg += " (keys of [" + s.name + "]: " + join(key_names(s)) + ")";
  return msg;
}

// Where each key was set ("data.batch_size" -> "FILE:LINE:COL" or "--data.batch_size=8").
using KeyLocations = std::map<std::string, std::string>;

const toml::source_region& key_region(const toml::key& k, const toml::node& value) {
  return k.source().begin.line ? k.source() : value.source();
}

// The entries of a table in file order (toml++ keeps them sorted by name), so the first error is reported.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [k, v] : t) entries.emplace_back(&k, &v);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& ra = key_region(*a.first, *a.second).begin;
    const auto& rb = key_region(*b.first, *b.second).begin;
    return std::tie(ra.line, ra.column) < std::tie(rb.line, rb.column);
  });
  return entries;
}

void apply_table(const std::vector<SectionSpec>& schema, const toml::table& root, const std::string& source,
                 KeyLocations& locations) {
  for (const auto& [k, node] : in_file_order(root)) {
    std::string name(k->str());
    std::string loc = where(source, key_region(*k, *node));
    const toml::table* table = node->as_table();
    const SectionSpec* section = find_section(schema, name);
    if (!table && section)
      throw ConfigError(loc + ": " + name + " must be a table ([" + name + "]), got " + describe(*node));
    if (!table) {
      std::string msg = loc + ": key " + name + " is outside any section";
      std::string hint = key_hint(schema, nullptr, name);
      if (!hint.empty())
        msg += "; did you mean " + hint + " (under [" + hint.substr(0, hint.find('.')) + "])?";
      throw ConfigError(msg);
    }
    if (!section) throw ConfigError(loc + ": " + unknown_section_message(schema, name));
    for (const auto& [kk, value] : in_file_order(*table)) {
      std::string key(kk->str());
      const FieldSpec* field = section->find(key);
      if (!field)
        throw ConfigError(where(source, key_region(*kk, *value)) + ": " + unknown_key_message(schema, *section, key));
      std::string value_loc = where(source, value->source());
      assign(*section, *field, *value, value_loc);
      locations[name + "." + key] = value_loc;
    }
  }
}

// The section and field an override's "section.key" names; a ConfigError prefixed `loc` (with a did-you-mean that
// repeats `value_suffix`, "=VALUE" or "") when it names none.
std::pair<const SectionSpec*, const FieldSpec*> override_target(const std::vector<SectionSpec>& schema,
                                                                const std::string& path, const std::string& loc,
                                                                const std::string& value_suffix) {
  size_t dot = path.find('.');
  if (dot == std::string::npos || path.find('.', dot + 1) != std::string::npos) {
    std::string msg = loc + ": an override must name section.key, got \"" + path + "\"";
    size_t last_dot = path.rfind('.');
    std::string key = last_dot == std::string::npos ? path : path.substr(last_dot + 1);
    std::string hint = key_hint(schema, nullptr, key);
    if (!hint.empty()) msg += "; did you mean --" + hint + value_suffix + "?";
    throw ConfigError(msg);
  }
  std::string sec = path.substr(0, dot), key = path.substr(dot + 1);
  const SectionSpec* section = find_section(schema, sec);
  if (!section) throw ConfigError(loc + ": " + unknown_section_message(schema, sec));
  const FieldSpec* field = section->find(key);
  if (!field) throw ConfigError(loc + ": " + unknown_key_message(schema, *section, key));
  return {section, field};
}

void apply_override(const std::vector<SectionSpec>& schema, const std::string& text, KeyLocations& locations) {
  const std::string loc = "--" + one_line(text);
  size_t eq = text.find('=');
  if (eq == std::string::npos) throw ConfigError(loc + ": an override must look like --section.key=value");
  std::string path = text.substr(0, eq), raw = text.substr(eq + 1);
  auto [section, field] = override_target(schema, path, loc, "=" + raw);
  if (raw.find_first_of("\r\n") != std::string::npos)
    throw ConfigError(loc + ": an override value must be on one line");
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + raw);
  } catch (const toml::parse_error& e) {
    // A bare word is a string for string-valued keys (--model.name=resnet18), and for a list the list of that one
    // string (--data.mirrors=http://host/). What opens a TOML array or string must be one: "[" is a broken array.
    const bool bare_word = raw.empty() || std::string("[\"'").find(raw.front()) == std::string::npos;
    if (field->kind == FieldKind::StringList && !bare_word)
      throw ConfigError(loc + ": " + path + " must be " + kind_name(field->kind) + " ([\"a\", \"b\"]) or one bare " +
                        "word, got \"" + raw + "\" (" + one_line(std::string(e.description())) + ")");
    if (field->kind == FieldKind::String || field->kind == FieldKind::Choice || field->kind == FieldKind::StringList) {
      parsed = toml::table{{"v", raw}};
    } else {
      throw ConfigError(loc + ": " + path + " must be " + kind_name(field->kind) + ", got \"" + raw + "\"");
    }
  }
  const toml::node* v = parsed.get("v");
  // Unquoted words that TOML reads as another type (a path like 2024) stay strings for string keys.
  if ((field->kind == FieldKind::String || (field->kind == FieldKind::Choice && field->choice_or_path)) &&
      !v->is_string()) {
    parsed = toml::table{{"v", raw}};
    v = parsed.get("v");
  }
  assign(*section, *field, *v, loc);
  locations[path] = loc;
}

// The defaults "" and -1 stand for: each dataset's folder and normalisation.
void resolve_defaults(Config& cfg) {
  struct DatasetDefaults {
    const char* dir;
    double mean, std;
  };
  DatasetDefaults d{"", 0.0, 1.0};  // synthetic
  if (cfg.data.dataset == DatasetName::FashionMnist) d = {"/usr/share/datasets/fashion-mnist", 0.2860, 0.3530};
  if (cfg.data.dataset == DatasetName::Mnist) d = {"data/mnist", 0.1307, 0.3081};
  if (cfg.data.dir.empty()) cfg.data.dir = d.dir;
  if (cfg.data.mean < 0) cfg.data.mean = d.mean;
  if (cfg.data.std <= 0) cfg.data.std = d.std;
  if (cfg.checkpoint.dir.empty()) cfg.checkpoint.dir = cfg.job.out_dir + "/checkpoints";
}

// Rules across keys; the error points at the first of `keys` that the file or an override set.
void check_consistency(const Config& cfg, const std::string& source, const KeyLocations& locations) {
  auto fail = [&](std::initializer_list<const char*> keys, const std::string& msg) {
    std::string loc = source + ":1:1";
    for (const char* k : keys) {
      auto it = locations.find(k);
      if (it != locations.end()) {
        loc = it->second;
        break;
      }
    }
    throw ConfigError(loc + ": " + msg);
  };
  if (cfg.data.download && cfg.data.dataset != DatasetName::Mnist)
    fail({"data.download", "data.dataset"},
         "data.download is only supported for dataset \"mnist\" (got \"" + choice_name(cfg.data.dataset) + "\")");
  if (cfg.data.dataset != DatasetName::Synthetic && cfg.data.image_size != 28)
    fail({"data.image_size", "data.dataset"},
         "data.image_size applies to dataset \"synthetic\" only; MNIST-format images are 28x28");
  if (cfg.data.dataset != DatasetName::Synthetic && cfg.model.in_channels != 1)
    fail({"model.in_channels", "data.dataset"},
         "data.dataset = \"" + choice_name(cfg.data.dataset) + "\" has 1-channel (grayscale) images, but "
         "model.in_channels = " + std::to_string(cfg.model.in_channels) + "; set model.in_channels = 1");
  if (cfg.model.name == ModelName::Net && cfg.data.image_size != 28)
    fail({"data.image_size", "model.name"}, "model net expects 28x28 images (data.image_size = 28)");
  if (cfg.optimizer.nesterov && (cfg.optimizer.momentum <= 0 || cfg.optimizer.name != OptimizerName::Sgd))
    fail({"optimizer.nesterov", "optimizer.momentum", "optimizer.name"},
         "optimizer.nesterov needs optimizer.name = \"sgd\" and optimizer.momentum > 0");
  if (cfg.training.deterministic && cfg.training.cudnn_benchmark)
    fail({"training.cudnn_benchmark", "training.deterministic"},
         "training.cudnn_benchmark picks convolution algorithms by timing them, which training.deterministic = true "
         "rules out; set one of them to false");
  const DistConfig& dist = cfg.dist;
  if (dist.device == DeviceChoice::Cpu && dist.backend == BackendChoice::Nccl)
    fail({"dist.backend", "dist.device"}, "dist.backend = \"nccl\" runs on CUDA devices, but dist.device = \"cpu\"; "
                                          "use dist.backend = \"gloo\" or \"auto\" on CPU");
  const bool nccl = dist.backend == BackendChoice::Nccl ||
                    (dist.backend == BackendChoice::Auto && dist.device == DeviceChoice::Cuda);
  if (nccl && dist.allreduce == AllreducePath::Shm)
    fail({"dist.allreduce", "dist.backend", "dist.device"},
         "dist.allreduce = \"shm\" is for the gloo backend, and these dist settings choose nccl (NCCL has its own "
         "intra-host transport); use dist.allreduce = \"auto\" or dist.backend = \"gloo\"");
}


}  // namespace

Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  Config cfg;
  cfg.source = source_name;
  auto schema = config_schema(cfg);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(where(source_name, e.source()) + ": " + one_line(std::string(e.description())));
  }
  KeyLocations locations;
  apply_table(schema, root, source_name, locations);
  for (const auto& o : overrides) apply_override(schema, o, locations);
  resolve_defaults(cfg);
  check_consistency(cfg, source_name, locations);
  return cfg;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_config_file(path), path, overrides);
}

std::string read_config_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO returns at once (fstat then refuses it) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    throw ConfigError(path + ": cannot open config file: " + std::strerror(err));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw ConfigError(path + ": cannot stat config file: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError(path + ": is a directory, not a config file");
  if (!S_ISREG(st.st_mode))
    throw ConfigError(path + ": is not a regular file (a device, pipe or socket); give a TOML file");
  auto too_big = [&] {
    return ConfigError(path + ": config file is larger than " + std::to_string(kMaxConfigBytes >> 20) +
                       " MiB; a config is a short TOML file");
  };
  if (st.st_size > static_cast<off_t>(kMaxConfigBytes)) throw too_big();
  // Read at most one byte past the limit: a file that grows while we read (or claims size 0, like /proc) stays bounded.
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(path + ": cannot read config file: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) throw too_big();
  }
  return text;
}

std::string format_config(const Config& cfg_in) {
  Config cfg = cfg_in;
  auto schema = config_schema(cfg);
  std::ostringstream os;
  for (size_t i = 0; i < schema.size(); ++i) {
    os << (i ? "\n" : "") << "[" << schema[i].name << "]\n";
    for (const auto& f : schema[i].fields) os << f.key << " = " << format_field_value(f) << "\n";
  }
  return os.str();
}

std::string format_field_value(const FieldSpec& f) {
  auto quote = [](const std::string& s) {
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
  };
  std::ostringstream os;
  switch (f.kind) {
    case FieldKind::Bool:
      os << (*static_cast<const bool*>(f.target) ? "true" : "false");
      break;
    case FieldKind::Int:
      os << *static_cast<const int64_t*>(f.target);
      break;
    case FieldKind::Float:
      os << format_number(*static_cast<const double*>(f.target));
      break;
    case FieldKind::String:
      os << quote(*static_cast<const std::string*>(f.target));
      break;
    case FieldKind::Choice:
      os << quote(f.choice_text());
      break;
    case FieldKind::StringList: {
      const auto& items = *static_cast<const std::vector<std::string>*>(f.target);
      os << "[";
      for (size_t j = 0; j < items.size(); ++j) os << (j ? ", " : "") << quote(items[j]);
      os << "]";
      break;
    }
  }
  return os.str();
}

std::string range_text(const FieldSpec& f) {
  auto bound = [&](double b) {
    if (f.kind == FieldKind::Int) return std::to_string(static_cast<int64_t>(b));
    // Whole bounds as written in a config (604800.0, not 6.048e+05); others in the shortest form that reads back.
    if (std::fabs(b) < 1e15 && b == std::trunc(b)) return std::to_string(static_cast<int64_t>(b)) + ".0";
    return format_number(b);
  };
  std::string rule;
  if (std::isfinite(f.min)) rule = std::string(f.min_exclusive ? "> " : ">= ") + bound(f.min);
  if (std::isfinite(f.max))
    rule += (rule.empty() ? "" : " and ") + std::string(f.max_exclusive ? "< " : "<= ") + bound(f.max);
  if (f.default_marker) rule = bound(*f.default_marker) + " (the dataset's default) or " + rule;
  return rule;
}

FieldKind override_kind(const std::string& path, const std::string& loc) {
  Config cfg;
  auto schema = config_schema(cfg);
  return override_target(schema, path, loc, "").second->kind;
}

}  // namespace ddp
