// Key: what one config key declares beside its C++ type and default: its name, one line of doc, its allowed range.
#pragma once

#include <limits>
#include <optional>

namespace ddp {

// Written in a section's keys() next to the field it describes, e.g.
//   key(s.batch_size, Key("batch_size", "samples per rank and micro-batch").at_least(1).at_most(kMaxBatch));
// Parsing, overrides, --print-config, --help, docs/configuration.md's key table and the checkpoint's config comparison
// all read it.
struct Key {
  const char* name;
  const char* doc;  // one line
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false, max_open = false;  // the bound itself is excluded
  std::optional<double> default_marker;     // a number also accepted outside the range, meaning marker_meaning
  bool nonempty = false;                    // a string that may not be ""
  bool resume_may_change = false;           // a resumed run may set another value without a "config differs" warning
  bool training_transform = false;          // read by the standard training transform of class folders only
  // What default_marker stands for, as errors and --help say it.
  const char* marker_meaning = "the dataset's default";

  constexpr Key(const char* key_name, const char* key_doc) : name(key_name), doc(key_doc) {}

  constexpr Key at_least(double v) const { return with_min(v, false); }
  constexpr Key above(double v) const { return with_min(v, true); }
  constexpr Key at_most(double v) const { return with_max(v, false); }
  constexpr Key below(double v) const { return with_max(v, true); }
  // -1 (or `marker`) stands for "the dataset's default" beside the range (data.mean, data.std).
  constexpr Key or_dataset_default(double marker = -1) const {
    Key k = *this;
    k.default_marker = marker;
    return k;
  }
  // `marker` stands for "unset" beside the range; `meaning` says what unset does ("unset: no norm group").
  constexpr Key or_unset(double marker, const char* meaning) const {
    Key k = *this;
    k.default_marker = marker;
    k.marker_meaning = meaning;
    return k;
  }
  constexpr Key not_empty() const {
    Key k = *this;
    k.nonempty = true;
    return k;
  }
  // Changes where outputs go, how fast or how long a run is, never the weights of the steps a checkpoint holds:
  // resuming with another value is the same run (job.out_dir, data.workers, training.epochs, checkpoint.*, ...).
  constexpr Key resume_may_differ() const {
    Key k = *this;
    k.resume_may_change = true;
    return k;
  }
  // Read by the standard training transform of a dataset of class folders (an augmentation's key): another value than
  // the default with any other dataset or data.augment is a config error.
  constexpr Key of_training_transform() const {
    Key k = *this;
    k.training_transform = true;
    return k;
  }

 private:
  constexpr Key with_min(double v, bool open) const {
    Key k = *this;
    k.min = v;
    k.min_open = open;
    return k;
  }
  constexpr Key with_max(double v, bool open) const {
    Key k = *this;
    k.max = v;
    k.max_open = open;
    return k;
  }
};

}  // namespace ddp
