// Reading a config: strict TOML loading, --section.key overrides, the datasets' defaults and the rules across keys.
#include "config/config.h"

#include "base/folders.h"
#include "base/host_port.h"
#include "config/key_walk.h"

#include <toml++/toml.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace ddp {
using namespace config_keys;
namespace {

std::string where(const std::string& source, const toml::source_region& r) {
  std::ostringstream os;
  os << source << ":" << (r.begin.line ? r.begin.line : 1) << ":" << (r.begin.column ? r.begin.column : 1);
  return os.str();
}

// Errors are one line: newlines (in a toml++ description or an override's text) become spaces.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// An override as an error line quotes it: its first 80 characters, "..." for the rest.
std::string override_excerpt(const std::string& text) {
  constexpr size_t kShown = 80;
  return text.size() <= kShown ? text : text.substr(0, kShown) + "...";
}

std::string describe(const toml::node& n) {
  std::ostringstream os;
  switch (n.type()) {
    case toml::node_type::string:
      return "string \"" + *n.value<std::string>() + "\"";
    case toml::node_type::integer:
      os << "integer " << *n.value<int64_t>();
      return os.str();
    case toml::node_type::floating_point:
      return "float " + format_number(*n.value<double>());
    case toml::node_type::boolean:
      return std::string("boolean ") + (*n.value<bool>() ? "true" : "false");
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    default:
      return "a date/time";
  }
}

// One TOML value into one field; `name` is "section.key", `loc` prefixes every error.
class Assign {
 public:
  Assign(const Key& key, const toml::node& v, std::string name, std::string loc)
      : key_(key), v_(v), name_(std::move(name)), loc_(std::move(loc)) {}

  void operator()(bool& f) const {
    if (!v_.is_boolean()) throw type_error(KeyKind::Bool);
    f = *v_.value<bool>();
  }
  void operator()(int64_t& f) const { f = integer(v_, KeyKind::Int); }
  void operator()(double& f) const { f = number(v_, KeyKind::Float, /*marker_allowed=*/true); }
  void operator()(PerChannel& f) const {
    if (v_.is_number()) {
      f = {number(v_, KeyKind::Floats, /*marker_allowed=*/true)};
      return;
    }
    const toml::array* arr = v_.as_array();
    if (!arr) throw type_error(KeyKind::Floats);
    check_length(arr->size(), 1, kMaxChannels);
    PerChannel values;
    for (const auto& e : *arr) values.push_back(number(e, KeyKind::Floats, /*marker_allowed=*/false));
    f = values;
  }
  void operator()(std::vector<int64_t>& f) const {  // one integer is the list of it
    if (v_.is_integer()) {
      f = {integer(v_, KeyKind::Ints)};
      return;
    }
    const toml::array* arr = v_.as_array();
    if (!arr) throw type_error(KeyKind::Ints);
    check_length(arr->size(), 0, kMaxListItems);
    std::vector<int64_t> values;
    for (const auto& e : *arr) values.push_back(integer(e, KeyKind::Ints));
    f = values;
  }
  void operator()(std::string& f) const {
    if (!v_.is_string()) throw type_error(KeyKind::String);
    if (key_.nonempty && v_.value<std::string>()->empty())
      throw ConfigError(loc_ + ": " + name_ + " must not be empty");
    f = *v_.value<std::string>();
  }
  void operator()(std::vector<std::string>& f) const {
    if (v_.is_string()) {
      f = {*v_.value<std::string>()};
      return;
    }
    const toml::array* arr = v_.as_array();
    if (!arr) throw type_error(KeyKind::List);
    std::vector<std::string> items;
    for (const auto& e : *arr) {
      if (!e.is_string()) throw ConfigError(loc_ + ": " + name_ + " must be an array of strings, got " + describe(e));
      items.push_back(*e.value<std::string>());
    }
    f = items;
  }
  template <class E, class = std::enable_if_t<std::is_enum_v<E>>>
  void operator()(E& f) const {
    const std::string s = choice_text<E>();
    const std::optional<E> value = parse_choice<E>(s);
    if (!value) throw bad_choice<E>(s);
    f = *value;
  }
  void operator()(IntOrAuto& f) const {
    if (v_.is_string() && *v_.value<std::string>() == "auto") {
      f = IntOrAuto{true, 0};
      return;
    }
    if (!v_.is_integer()) throw type_error(KeyKind::IntOrAuto);
    f = IntOrAuto{false, integer(v_, KeyKind::IntOrAuto)};
  }
  void operator()(BoolOrAuto& f) const {
    if (v_.is_string() && *v_.value<std::string>() == "auto") {
      f = BoolOrAuto{true, false};
      return;
    }
    if (!v_.is_boolean()) throw type_error(KeyKind::BoolOrAuto);
    f = BoolOrAuto{false, *v_.value<bool>()};
  }
  template <class Row>
  void operator()(RowChoice<Row>& f) const {
    const std::string s = choice_text<RowChoice<Row>>();
    const std::vector<std::string> names = row_names<Row>();
    if (std::find(names.begin(), names.end(), s) == names.end()) throw bad_choice<RowChoice<Row>>(s);
    f.name = s;
  }
  void operator()(ResumeFrom& f) const {
    const std::string s = choice_text<ResumeFrom>();
    const std::optional<ResumeMode> mode = parse_choice<ResumeMode>(s);
    if (!mode && s.empty()) throw bad_choice<ResumeFrom>(s);
    f = mode ? ResumeFrom{*mode, ""} : ResumeFrom{ResumeMode::Path, s};
  }

 private:
  ConfigError type_error(KeyKind kind, const toml::node* v = nullptr) const {
    return ConfigError(loc_ + ": " + name_ + " must be " + kind_must_be(kind) + ", got " + describe(v ? *v : v_));
  }
  // An array's length within [least, most].
  void check_length(size_t n, size_t least, size_t most) const {
    if (n < least) throw ConfigError(loc_ + ": " + name_ + " must not be an empty array");
    if (n > most)
      throw ConfigError(loc_ + ": " + name_ + " takes at most " + std::to_string(most) + " values, got " +
                        std::to_string(n));
  }
  // An integer within the key's range, compared as integers: near 2^63 a double cannot tell neighbours apart.
  int64_t integer(const toml::node& v, KeyKind kind) const {
    if (!v.is_integer()) throw type_error(kind, &v);
    const int64_t x = *v.value<int64_t>();
    if (x < static_cast<int64_t>(key_.min) || x > static_cast<int64_t>(key_.max))
      throw out_of_range(kind, std::to_string(x));
    return x;
  }
  // A finite number within the key's range (or its default marker, where that may stand).
  double number(const toml::node& v, KeyKind kind, bool marker_allowed) const {
    if (!v.is_number()) throw type_error(kind, &v);
    const double x = *v.value<double>();
    if (!std::isfinite(x)) throw ConfigError(loc_ + ": " + name_ + " must be a finite number, got " + format_number(x));
    const bool low = key_.min_open ? !(x > key_.min) : !(x >= key_.min);
    const bool high = key_.max_open ? !(x < key_.max) : !(x <= key_.max);
    if (!marker_allowed && x == key_.default_marker)
      throw ConfigError(loc_ + ": " + name_ + ": " + format_number(x) + " (" + key_.marker_meaning +
                        ") stands alone, not in a list");
    if ((low || high) && x != key_.default_marker) throw out_of_range(kind, format_number(x));
    return x;
  }
  ConfigError out_of_range(KeyKind kind, const std::string& shown) const {
    return ConfigError(loc_ + ": " + name_ + " must be " + range_text(key_, kind) + ", got " + shown);
  }
  template <class T>
  std::string choice_text() const {
    if (!v_.is_string()) throw type_error(KeyKind::Choice);
    return *v_.value<std::string>();
  }
  template <class T>
  ConfigError bad_choice(const std::string& s) const {
    const std::vector<std::string> names = names_of<T>();
    std::string msg = loc_ + ": " + name_ + " must be one of " + join(names, ", ") +
                      (takes_a_path<T> ? " or a path" : "") + ", got \"" + s + "\"";
    const std::string hint = closest_match(s, names);
    if (!hint.empty()) msg += "; did you mean \"" + hint + "\"?";
    return ConfigError(msg);
  }

  const Key& key_;
  const toml::node& v_;
  std::string name_, loc_;
};

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

bool is_retired(const std::string& path) {
  for (const RetiredKey& k : kRetiredKeys)
    if (path == k.path) return true;
  return false;
}

void apply_table(Config& cfg, const toml::table& root, const std::string& source, KeyLocations& locations) {
  const KeyNames& names = key_names();
  for (const auto& [k, node] : in_file_order(root)) {
    const std::string section(k->str());
    const std::string loc = where(source, key_region(*k, *node));
    const toml::table* table = node->as_table();
    if (!table && names.has_section(section))
      throw ConfigError(loc + ": " + section + " must be a table ([" + section + "]), got " + describe(*node));
    if (!table) {
      std::string msg = loc + ": key " + section + " is outside any section";
      const std::string hint = names.key_hint("", section);
      if (!hint.empty()) msg += "; did you mean " + hint + " (under [" + hint.substr(0, hint.find('.')) + "])?";
      throw ConfigError(msg);
    }
    if (!names.has_section(section)) throw ConfigError(loc + ": " + names.unknown_section(section));
    for (const auto& [kk, value] : in_file_order(*table)) {
      const std::string key(kk->str());
      const std::string value_loc = where(source, value->source());
      const bool known = with_key(cfg, section, key, [&, v = value](auto& field, const Key& declared) {
        Assign(declared, *v, section + "." + key, value_loc)(field);
      });
      if (!known && is_retired(section + "." + key)) continue;
      if (!known) throw ConfigError(where(source, key_region(*kk, *value)) + ": " + names.unknown_key(section, key));
      locations[section + "." + key] = value_loc;
    }
  }
}

// One --section.key=value: the value is read as TOML; a bare word is a string for keys that take one.
void apply_override(Config& cfg, const std::string& text, KeyLocations& locations) {
  const std::string loc = "--" + override_excerpt(one_line(text));
  const size_t eq = text.find('=');
  if (eq == std::string::npos) throw ConfigError(loc + ": an override must look like --section.key=value");
  const std::string path = text.substr(0, eq), raw = text.substr(eq + 1);
  if (is_retired(path)) return;
  const auto [section, key] = key_names().override_target(path, loc, "=" + raw);
  if (raw.find_first_of("\r\n") != std::string::npos)
    throw ConfigError(loc + ": an override value must be on one line");
  with_key(cfg, section, key, [&](auto& field, const Key& declared) {
    using T = std::decay_t<decltype(field)>;
    constexpr KeyKind kind = kind_of<T>();
    constexpr bool words = kind == KeyKind::String || kind == KeyKind::Choice || kind == KeyKind::List ||
                           kind == KeyKind::IntOrAuto || kind == KeyKind::BoolOrAuto;
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + raw);
    } catch (const toml::parse_error& e) {
      // A bare word is a string for string-valued keys (--model.name=resnet18), and for a list the list of that one
      // string (--data.mirrors=http://host/). What opens a TOML array or string must be one: "[" is a broken array.
      const bool bare_word = raw.empty() || std::string("[\"'").find(raw.front()) == std::string::npos;
      if (kind == KeyKind::List && !bare_word)
        throw ConfigError(loc + ": " + path + " must be " + kind_must_be(kind) +
                          " ([\"a\", \"b\"]) or one bare word, got \"" + override_excerpt(raw) + "\" (" +
                          one_line(std::string(e.description())) + ")");
      if (!words)
        throw ConfigError(loc + ": " + path + " must be " + kind_must_be(kind) + ", got \"" + override_excerpt(raw) +
                          "\"");
      parsed = toml::table{{"v", raw}};
    }
    // Unquoted words that TOML reads as another type (a path like 2024) stay strings for keys that take a string.
    if ((kind == KeyKind::String || takes_a_path<T>)&&!parsed.get("v")->is_string()) parsed = toml::table{{"v", raw}};
    Assign(declared, *parsed.get("v"), path, loc)(field);
  });
  locations[path] = loc;
}

bool is_set(const KeyLocations& locations, const char* key) { return locations.count(key) > 0; }

// The defaults "" and -1 stand for, and the keys the config leaves unset, from data.dataset's row: its folder, its
// normalisation, its images' channels and size, its classes.
void resolve_defaults(Config& cfg, const KeyLocations& locations) {
  const DatasetRow& d = dataset_row(cfg.data.dataset.name);
  if (cfg.data.dir.empty()) cfg.data.dir = d.dir;
  if (cfg.data.mean == PerChannel{-1}) cfg.data.mean = d.mean;
  if (cfg.data.std == PerChannel{-1}) cfg.data.std = d.std;
  // A dataset of files decides its image shape unless the config says otherwise (then check_consistency objects).
  if (d.channels && !is_set(locations, "model.in_channels")) cfg.model.in_channels = d.channels;
  if (d.image_size && !is_set(locations, "data.image_size")) cfg.data.image_size = d.image_size;
  if (d.num_classes && !is_set(locations, "model.num_classes")) cfg.model.num_classes = d.num_classes;
  // training.max_steps without training.epochs trains that many steps (PyTorch Lightning's max_epochs = -1).
  if (cfg.training.max_steps > 0 && !is_set(locations, "training.epochs")) cfg.training.epochs = 0;
  if (d.image_files) {
    DataConfig& data = cfg.data;
    if (data.train_crop_size == 0) data.train_crop_size = data.image_size;
    if (data.val_crop_size == 0) data.val_crop_size = data.image_size;
    if (data.resize_size == 0) data.resize_size = data.val_crop_size * 256 / 224;
    if (data.val_resize_size == 0) data.val_resize_size = data.resize_size;
  }
  if (d.class_folders) {
    // The classes are the training split's class folders (torchvision's find_classes); a folder that cannot be
    // read leaves the default for the dataset's own error to explain.
    const size_t classes = sorted_subfolders(cfg.data.dir + "/train").size();
    if (!is_set(locations, "model.num_classes") && classes >= 2) cfg.model.num_classes = static_cast<int64_t>(classes);
  }
  if (cfg.checkpoint.dir.empty()) cfg.checkpoint.dir = cfg.job.out_dir + "/checkpoints";
  resolve_model_defaults(cfg.model);
}

// The shard keys: both splits' patterns for a dataset of shards, none of them for another.
template <class Fail>
void check_shard_keys(const Config& cfg, const Fail& fail) {
  const DataConfig& data = cfg.data;
  const std::string dataset = "data.dataset = \"" + data.dataset.name + "\"";
  if (dataset_row(data.dataset.name).shards) {
    for (const auto& [key, value] :
         {std::pair{"data.train_shards", &data.train_shards}, std::pair{"data.val_shards", &data.val_shards}})
      if (value->empty())
        fail({key, "data.dataset"}, dataset + " needs " + key +
                                        ": the split's tar shards, e.g. \"/data/train-{000000..000127}.tar\" (brace "
                                        "patterns joined by \"::\")");
    if (data.ra_reps > 1)
      fail({"data.ra_reps", "data.dataset"}, "data.ra_reps repeats samples of a random-access split; " + dataset +
                                                 " reads its shards in order (set ra_reps = 0)");
    return;
  }
  // A key at its default is not refused: --print-config (and a checkpoint's config) writes every key.
  const DataConfig defaults;
  for (const auto& [key, set] : {std::pair{"data.train_shards", !data.train_shards.empty()},
                                 std::pair{"data.val_shards", !data.val_shards.empty()},
                                 std::pair{"data.shuffle_buffer", data.shuffle_buffer != defaults.shuffle_buffer},
                                 std::pair{"data.shards_in_flight", data.shards_in_flight != defaults.shards_in_flight},
                                 std::pair{"data.shard_retries", data.shard_retries != defaults.shard_retries},
                                 std::pair{"data.class_names", !data.class_names.empty()}})
    if (set)
      fail({key, "data.dataset"},
           std::string(key) + " applies to data.dataset = " +
               spoken_list(quoted_names(dataset_rows(), [](const DatasetRow& row) { return row.shards; }), "or") +
               " only, not " + dataset);
}

// An image folder's crop and resize sizes (image_size and resize_size, or the FixRes keys that refine them); the other
// datasets' images are the model's input as they are.
template <class Fail>
void check_crop_sizes(const Config& cfg, const KeyLocations& locations, const Fail& fail) {
  const DataConfig& data = cfg.data;
  if (!dataset_row(data.dataset.name).image_files) {
    const std::string only =
        " applies to data.dataset = " +
        spoken_list(quoted_names(dataset_rows(), [](const DatasetRow& row) { return row.image_files; }), "or") +
        " only, not \"" + data.dataset.name + "\"";
    for (const auto& [key, value] :
         {std::pair{"data.train_crop_size", data.train_crop_size}, std::pair{"data.val_crop_size", data.val_crop_size},
          std::pair{"data.val_resize_size", data.val_resize_size}, std::pair{"data.resize_size", data.resize_size}})
      if (value != 0) fail({key, "data.dataset"}, std::string(key) + only);
    if (data.interpolation != Interpolation::Bilinear)
      fail({"data.interpolation", "data.dataset"}, "data.interpolation" + only);
    return;
  }
  const char* resize = is_set(locations, "data.val_resize_size") ? "data.val_resize_size" : "data.resize_size";
  const char* crop = is_set(locations, "data.val_crop_size") ? "data.val_crop_size" : "data.image_size";
  if (data.val_resize_size < data.val_crop_size)
    fail({resize, crop}, std::string(resize) + " = " + std::to_string(data.val_resize_size) + " is smaller than " +
                             crop + " = " + std::to_string(data.val_crop_size) +
                             ": evaluation resizes the shorter side, then center-crops it");
}

// lr_scheduler's warmup, training's stopping rule and the EMA's schedule.
template <class Fail>
void check_schedules(const Config& cfg, const Fail& fail) {
  const TrainingConfig& t = cfg.training;
  const LrSchedulerConfig& lr = cfg.lr_scheduler;
  if (t.epochs == 0 && t.max_steps == 0)
    fail({"training.epochs", "training.max_steps"},
         "training.epochs = 0 trains until training.max_steps, and max_steps = 0 sets no limit; set one of them");
  if (lr.warmup_method == WarmupMethod::Constant && lr.warmup_start_factor == 0 && lr.warmup_steps > 0)
    fail({"lr_scheduler.warmup_method", "lr_scheduler.warmup_start_factor"},
         "lr_scheduler.warmup_method = \"constant\" trains the warmup at lr x warmup_start_factor; set "
         "lr_scheduler.warmup_start_factor (torchvision's reference scripts use 0.01)");
  const bool ema_schedule = t.ema_every_steps != 1 || t.ema_adjust;
  if (ema_schedule && t.ema_decay == 0)
    fail({t.ema_adjust ? "training.ema_adjust" : "training.ema_every_steps", "training.ema_decay"},
         std::string(t.ema_adjust ? "training.ema_adjust" : "training.ema_every_steps") +
             " shapes the EMA of training.ema_decay, which is 0 (off); set ema_decay, e.g. 0.99998");
  if (t.ema_adjust && t.epochs == 0)
    fail({"training.ema_adjust", "training.epochs"},
         "training.ema_adjust divides by training.epochs, which is 0 (training.max_steps ends the run); set "
         "training.epochs");
}

// Rules across keys; the error points at the first of `keys` that the file or an override set.
// training.cuda_graph's rules: what the captured step holds must run on the device alone, with the shapes of its
// capture (the CUDA Graphs notes of PyTorch: no host reads or synchronisation, static shapes, no CPU collectives).
template <class Fail>
void check_cuda_graph(const Config& cfg, const Fail& fail) {
  if (!cfg.training.cuda_graph) return;
  const std::string why = "training.cuda_graph captures the training step in a CUDA graph: ";
  if (cfg.dist.device == DeviceChoice::Cpu)
    fail({"training.cuda_graph", "dist.device"}, why + "it needs a GPU; set dist.device = \"cuda\" or \"auto\"");
  if (cfg.dist.backend == BackendChoice::Gloo)
    fail({"training.cuda_graph", "dist.backend"},
         why + "Gloo's collectives run on the host and cannot be captured; set dist.backend = \"nccl\" or \"auto\"");
  if (cfg.training.ema_every_steps != 1 || (cfg.training.ema_adjust && cfg.lr_scheduler.warmup_steps > 0))
    fail(
        {"training.cuda_graph", cfg.training.ema_every_steps != 1 ? "training.ema_every_steps" : "training.ema_adjust"},
        why +
            "the graph updates the EMA after every step it replays; set training.ema_every_steps = 1 and, during "
            "a warmup, training.ema_adjust = false");
  if (!model_row(cfg.model.name.name).cuda_graph)
    fail({"training.cuda_graph", "model.name"},
         why + "model.name = \"" + cfg.model.name.name +
             "\" may change shapes or read the host inside its forward; set model.name = " +
             spoken_list(quoted_names(model_rows(), [](const ModelRow& row) { return row.cuda_graph; }), "or"));
  if (cfg.training.grad_accum_steps != 1)
    fail({"training.cuda_graph", "training.grad_accum_steps"},
         why + "one micro-batch per optimizer step is captured; set training.grad_accum_steps = 1");
  if (!optimizer_row(cfg.optimizer.name.name).steps_on_device || !cfg.optimizer.fused) {
    std::vector<std::string> names;
    for (const OptimizerKeyRow& row : optimizer_rows())
      if (row.steps_on_device) names.push_back("\"" + std::string(row.name) + "\"");
    fail({"training.cuda_graph", "optimizer.fused", "optimizer.name"},
         why +
             "the optimizer step must take its learning rate and the loss scaler's verdict on the device; set "
             "optimizer.name = " +
             join(names, " or ") + " with optimizer.fused = true (its fused kernel does)");
  }
  if (cfg.model.sync_batchnorm)
    fail({"training.cuda_graph", "model.sync_batchnorm"},
         why + "model.sync_batchnorm's collectives in the forward are not captured; set it to false");
  if (cfg.dist.find_unused_parameters)
    fail({"training.cuda_graph", "dist.find_unused_parameters"},
         why +
             "dist.find_unused_parameters searches the autograd graph on the host after every forward; set it to "
             "false");
  if (cfg.data.mixup_alpha > 0 || cfg.data.cutmix_alpha > 0)
    fail({"training.cuda_graph", "data.mixup_alpha", "data.cutmix_alpha"},
         why +
             "data.mixup_alpha and data.cutmix_alpha draw each batch's mixing weight and box on the host, and a "
             "CutMix box changes the copied slice's shape; set both to 0");
  if (cfg.dist.grad_compression != GradCompression::None || cfg.dist.skip_zero_gradients)
    fail({"training.cuda_graph", "dist.grad_compression", "dist.skip_zero_gradients"},
         why +
             "DDP communication hooks are not captured; set dist.grad_compression = \"none\" and "
             "dist.skip_zero_gradients = false");
}

// The optimizer's rules: a bool key of another optimizer set away from its default (that optimizer's class would
// refuse the argument), fused where torch.optim has no fused implementation, and the rules of its own row.
template <class Fail>
void check_optimizer(const OptimizerConfig& opt, const Fail& fail) {
  const OptimizerKeyRow& row = optimizer_row(opt.name.name);
  for (const HyperparameterKey& h : hyperparameter_keys()) {
    const bool default_on = h.default_value != 0;
    if (!h.flag || opt.hyper.flag(h.key.name) == default_on) continue;
    std::vector<std::string> takers;
    bool taken = false;
    for (const OptimizerKeyRow& r : optimizer_rows())
      for (const HyperparameterKey& k : r.keys)
        if (std::string_view(k.key.name) == h.key.name) {
          takers.push_back("\"" + std::string(r.name) + "\"");
          taken = taken || &r == &row;
        }
    if (!taken)
      fail({"optimizer." + std::string(h.key.name), "optimizer.name"},
           "optimizer." + std::string(h.key.name) + " is taken by optimizer.name = " + join(takers, " or ") +
               ", not \"" + opt.name.name + "\"; set " + h.key.name + (default_on ? " = true" : " = false") +
               " or another optimizer.name");
  }
  if (opt.fused && !row.has_fused)
    fail({"optimizer.fused", "optimizer.name"},
         std::string(row.torch_name) + " has no fused implementation in torch.optim; set optimizer.fused = false");
  if (row.check)
    if (const std::optional<BrokenRule> broken = row.check(opt)) fail(broken->keys, broken->message);
}

void check_consistency(const Config& cfg, const std::string& source, const KeyLocations& locations) {
  auto fail = [&](const std::vector<std::string>& keys, const std::string& msg) {
    std::string loc = source + ":1:1";
    for (const std::string& k : keys) {
      auto it = locations.find(k);
      if (it != locations.end()) {
        loc = it->second;
        break;
      }
    }
    throw ConfigError(loc + ": " + msg);
  };
  const DatasetRow& facts = dataset_row(cfg.data.dataset.name);
  // "dataset \"mnist\"", "datasets \"image_folder\" and \"synthetic\"": the rows `pick` selects.
  auto datasets = [](auto&& pick) {
    const std::vector<std::string> names = quoted_names(dataset_rows(), pick);
    return (names.size() == 1 ? "dataset " : "datasets ") + spoken_list(names, "and");
  };
  if (cfg.data.download && !facts.download)
    fail({"data.download", "data.dataset"}, "data.download is only supported for " +
                                                datasets([](const DatasetRow& row) { return row.download; }) +
                                                " (got \"" + cfg.data.dataset.name + "\")");
  const std::string dataset = "data.dataset = \"" + cfg.data.dataset.name + "\"";
  if (!facts.any_image_size && cfg.data.image_size != facts.image_size)
    fail({"data.image_size", "data.dataset"}, "data.image_size applies to " +
                                                  datasets([](const DatasetRow& row) { return row.any_image_size; }) +
                                                  " only; " + dataset + " has " + std::to_string(facts.image_size) +
                                                  "x" + std::to_string(facts.image_size) + " images");
  if (facts.channels && cfg.model.in_channels != facts.channels)
    fail({"model.in_channels", "data.dataset"},
         dataset + " has " + std::to_string(facts.channels) +
             "-channel images, but model.in_channels = " + std::to_string(cfg.model.in_channels) +
             "; set model.in_channels = " + std::to_string(facts.channels) + " or leave it unset");
  // The labels a dataset holds: 0 .. num_classes - 1 of its row, or one per class folder of train/ (torchvision's
  // find_classes); a classifier with fewer outputs cannot take them (fewer folders: the dataset's own error). An unset
  // model.num_classes is the folders' count already (resolve_defaults), so only a set one has the folders read again.
  const bool count_folders = facts.class_folders && is_set(locations, "model.num_classes");
  const int64_t classes =
      count_folders ? static_cast<int64_t>(sorted_subfolders(cfg.data.dir + "/train").size()) : facts.num_classes;
  if (classes >= 2 && cfg.model.num_classes < classes)
    fail({"model.num_classes", "data.dataset"},
         dataset + " has " + std::to_string(classes) + " classes" +
             (facts.class_folders ? " (the class folders of " + cfg.data.dir + "/train)" : "") +
             ", but model.num_classes = " + std::to_string(cfg.model.num_classes) +
             "; set model.num_classes >= " + std::to_string(classes) + " or leave it unset");
  for (const auto& [key, values] : {std::pair{"data.mean", cfg.data.mean}, std::pair{"data.std", cfg.data.std}})
    if (values.size() != 1 && static_cast<int64_t>(values.size()) != cfg.model.in_channels)
      fail({key}, std::string(key) + " has " + std::to_string(values.size()) + " values for " +
                      std::to_string(cfg.model.in_channels) + "-channel images; give one value, or one per channel");
  check_crop_sizes(cfg, locations, fail);
  check_shard_keys(cfg, fail);
  // The keys of the standard training transform of a dataset of class folders (Key::of_training_transform): any
  // value but the default is refused elsewhere; a policy's own keys belong to that policy.
  const DataConfig data_defaults;
  std::map<std::string, std::string> transform_defaults;
  DataConfig::keys(data_defaults, [&](const auto& field, const Key& k) {
    if (k.training_transform) transform_defaults[k.name] = value_text(field);
  });
  DataConfig::keys(cfg.data, [&](const auto& field, const Key& k) {
    if (!k.training_transform || value_text(field) == transform_defaults[k.name]) return;
    const std::string key = std::string("data.") + k.name;
    if (!facts.image_files)
      fail({key, "data.dataset"}, key + " applies to the training transform of " +
                                      datasets([](const DatasetRow& row) { return row.image_files; }) + " only, not " +
                                      dataset);
    if (cfg.data.augment != Augment::Standard)
      fail({key, "data.augment"}, key +
                                      " applies to the standard training transform (RandomResizedCrop + flip); set "
                                      "data.augment = \"standard\" or leave " +
                                      key + " at its default");
  });
  const std::tuple<const char*, bool, AutoAugmentChoice, const char*> policy_keys[] = {
      {"data.ra_magnitude", cfg.data.ra_magnitude != data_defaults.ra_magnitude, AutoAugmentChoice::RandAugment,
       "rand_augment"},
      {"data.ra_num_ops", cfg.data.ra_num_ops != data_defaults.ra_num_ops, AutoAugmentChoice::RandAugment,
       "rand_augment"},
      {"data.augmix_severity", cfg.data.augmix_severity != data_defaults.augmix_severity, AutoAugmentChoice::AugMix,
       "augmix"}};
  for (const auto& [key, set, policy, name] : policy_keys)
    if (set && cfg.data.auto_augment != policy)
      fail({key, "data.auto_augment"}, std::string(key) + " is read by data.auto_augment = \"" + name +
                                           "\" only; set that policy, or leave " + key + " at its default");
  if (cfg.data.auto_augment_interpolation != data_defaults.auto_augment_interpolation &&
      cfg.data.auto_augment == AutoAugmentChoice::None)
    fail({"data.auto_augment_interpolation", "data.auto_augment"},
         "data.auto_augment_interpolation is read by a data.auto_augment policy only; set one, or leave "
         "data.auto_augment_interpolation at its default");
  const ModelRow& model = model_row(cfg.model.name.name);
  const std::string model_name = "model.name = \"" + cfg.model.name.name + "\"";
  // model.path and model.library: needed by the models whose row says what the file is, refused beside the others.
  const std::tuple<std::string, std::string_view ModelRow::*, std::string> file_keys[] = {
      {"model.path", &ModelRow::path, cfg.model.path}, {"model.library", &ModelRow::library, cfg.model.library}};
  for (const auto& [key, what, value] : file_keys) {
    if (!(model.*what).empty() && value.empty())
      fail({"model.name"}, model_name + " needs " + key + ": " + std::string(model.*what));
    if ((model.*what).empty() && !value.empty())
      fail({key, "model.name"},
           key + " is read by model.name = " +
               spoken_list(
                   quoted_names(model_rows(), [what = what](const ModelRow& row) { return !(row.*what).empty(); }),
                   "or") +
               " only, not by " + model_name);
  }
  if (model.stochastic_depth < 0 && is_set(locations, "model.stochastic_depth") && cfg.model.stochastic_depth > 0)
    fail({"model.stochastic_depth", "model.name"},
         "model.stochastic_depth applies to models with residual blocks torchvision drops at random; " + model_name +
             " has none");
  if (cfg.model.reset_head && !model.head_known)
    fail({"model.reset_head", "model.name"},
         "model.reset_head needs a model whose classifier head is known; " + model_name + " is loaded whole");
  if (cfg.model.reset_head && cfg.model.init_from.empty())
    fail({"model.reset_head"},
         "model.reset_head re-initialises the head of the weights model.init_from loads; set "
         "model.init_from or leave reset_head false");
  if (model.check)
    if (const std::optional<BrokenRule> broken = model.check(cfg)) fail(broken->keys, broken->message);
  check_optimizer(cfg.optimizer, fail);
  check_schedules(cfg, fail);
  if (!cfg.metrics.listen.empty() && !split_host_port(cfg.metrics.listen))
    fail({"metrics.listen"}, "metrics.listen = \"" + cfg.metrics.listen +
                                 "\" is not HOST:PORT (\"127.0.0.1:9100\", \"[::1]:9100\"; port 0 = a free one)");
  const std::string& mlflow = cfg.metrics.mlflow_uri;
  if (!mlflow.empty() && mlflow.rfind("http://", 0) != 0 && mlflow.rfind("https://", 0) != 0)
    fail({"metrics.mlflow_uri"},
         "metrics.mlflow_uri = \"" + mlflow +
             "\" is not an http:// or https:// URI (MLflow's REST API: \"http://127.0.0.1:5000\")");
  check_cuda_graph(cfg, fail);
  if (cfg.optimizer.fused && cfg.optimizer.foreach == Foreach::On)
    fail({"optimizer.fused", "optimizer.foreach"},
         "optimizer.fused and optimizer.foreach = \"on\" cannot both be set (torch.optim: \"`fused` and `foreach` "
         "cannot be `True` together.\"); set foreach = \"auto\" with fused");
  const LrSchedulerConfig& lr = cfg.lr_scheduler;
  if (lr.decay == LrDecay::MultiStep && lr.milestones.empty())
    fail({"lr_scheduler.milestones", "lr_scheduler.decay"},
         "lr_scheduler.decay = \"multistep\" needs lr_scheduler.milestones: the steps after warmup at which lr "
         "decays, e.g. [30000, 60000, 80000]");
  if (lr.decay != LrDecay::MultiStep && !lr.milestones.empty())
    fail({"lr_scheduler.milestones", "lr_scheduler.decay"},
         "lr_scheduler.milestones are read by lr_scheduler.decay = \"multistep\" only; set that decay, or "
         "milestones = []");
  if (cfg.training.deterministic && !cfg.training.cudnn_benchmark.automatic && cfg.training.cudnn_benchmark.value)
    fail({"training.cudnn_benchmark", "training.deterministic"},
         "training.cudnn_benchmark picks convolution algorithms by timing them, which training.deterministic = true "
         "rules out; set one of them to false");
  if (cfg.data.decode == DecodeChoice::Gpu && cfg.dist.device == DeviceChoice::Cpu)
    fail({"data.decode", "dist.device"},
         "data.decode = \"gpu\" decodes JPEGs with nvJPEG on the training GPU, but dist.device = \"cpu\"; use "
         "data.decode = \"cpu\" or \"auto\" on CPU");
  const DistConfig& dist = cfg.dist;
  if (dist.device == DeviceChoice::Cpu && dist.backend == BackendChoice::Nccl)
    fail({"dist.backend", "dist.device"},
         "dist.backend = \"nccl\" runs on CUDA devices, but dist.device = \"cpu\"; "
         "use dist.backend = \"gloo\" or \"auto\" on CPU");
  const bool nccl =
      dist.backend == BackendChoice::Nccl || (dist.backend == BackendChoice::Auto && dist.device == DeviceChoice::Cuda);
  if (nccl && (dist.allreduce == AllreducePath::Shm || dist.allreduce == AllreducePath::Hierarchical))
    fail({"dist.allreduce", "dist.backend", "dist.device"},
         "dist.allreduce = \"" + choice_name(dist.allreduce) +
             "\" is for the gloo backend, and these dist settings choose nccl (NCCL has its own "
             "intra-host transport and topology); use dist.allreduce = \"auto\" or dist.backend = \"gloo\"");
  if (dist.grad_compression == GradCompression::PowerSgd) {
    // PowerSGDState.__init__'s rule: its buckets are rebuilt after DDP's first iteration.
    if ((dist.powersgd_error_feedback || dist.powersgd_warm_start) && dist.powersgd_start_step <= 1)
      fail({"dist.powersgd_start_step", "dist.powersgd_error_feedback", "dist.powersgd_warm_start"},
           "PowerSGD with error feedback or warm start keeps state per DDP bucket, and DDP rebuilds its buckets after "
           "the first step: set dist.powersgd_start_step > 1 (PyTorch's PowerSGDState refuses it too)");
    if (dist.skip_zero_gradients)
      fail({"dist.grad_compression", "dist.skip_zero_gradients"},
           "dist.skip_zero_gradients sends whole or gathered gradients, PowerSGD sends low-rank factors: one "
           "communication hook at a time; set dist.skip_zero_gradients = false or another dist.grad_compression");
  }
  if (dist.static_graph && cfg.training.grad_accum_steps > 1)
    fail({"dist.static_graph", "training.grad_accum_steps"},
         "dist.static_graph takes the graph from DDP's first backward, which under training.grad_accum_steps > 1 "
         "is a no_sync one: PyTorch's Reducer cannot take it from there (DDP(static_graph=True) fails its "
         "expect_autograd_hooks_ assert); use dist.find_unused_parameters = true with accumulation");
}

}  // namespace

Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  Config cfg;
  cfg.source = source_name;
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(where(source_name, e.source()) + ": " + one_line(std::string(e.description())));
  }
  KeyLocations locations;
  apply_table(cfg, root, source_name, locations);
  for (const auto& o : overrides) apply_override(cfg, o, locations);
  resolve_defaults(cfg, locations);
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

}  // namespace ddp
