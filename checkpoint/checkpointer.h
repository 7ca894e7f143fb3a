// Checkpointer: when a checkpoint is due, writing it (rank 0, or a copy on every node), which one a run resumes from;
// the writers' I/O agreed by all ranks.
#pragma once

#include "config/config.h"
#include "distributed/context.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

class Checkpointer {
 public:
  using Log = std::function<void(const std::string&)>;  // rank 0's progress lines, or its warnings
  // "" when a checkpoint dict is one this run can continue from, else why not (the trainer's range checks).
  using Check = std::function<std::string(const c10::impl::GenericDict&)>;
  struct Resumed {
    std::string path;  // the file read ("" on ranks that did not read it); with node copies, also its host
    c10::impl::GenericDict state;
  };

  // checkpoint.dir must be resolved (config loading does it); out_dir holds model.pt (its crash debris is cleaned).
  Checkpointer(CheckpointConfig cfg, std::string out_dir, DistContext ctx, Log log, Log warn);

  // checkpoint.every_steps or every_epochs is set.
  bool enabled() const { return cfg_.every_steps > 0 || cfg_.every_epochs > 0; }
  // checkpoint.every_steps hits `step`.
  bool due_at_step(int64_t step) const { return cfg_.every_steps > 0 && step % cfg_.every_steps == 0; }
  // After an epoch's evaluation: every_epochs hits `epochs_done`, or every_steps hits the epoch's last step.
  bool due_at_epoch_end(int64_t epochs_done, int64_t step) const {
    return (cfg_.every_epochs > 0 && epochs_done % cfg_.every_epochs == 0) || due_at_step(step);
  }
  // The state at `step` is already a checkpoint (written by this run or resumed from).
  bool holds(int64_t step) const { return last_step_ == step; }

  // Settles the save in flight, then has every rank build the state (`make_state`, collective) and rank 0 serialise
  // it as the checkpoint of `step` and write it; with a copy on every node (checkpoint.replicas) it sends the bytes to
  // each node's LOCAL_RANK 0, which writes the same file into its own checkpoint.dir. Collective. The state's tensors
  // must be copies in host memory that no one changes (host_copy; Trainer::state_dict makes them: a tensor elsewhere
  // fails the save); built after the settling, they reuse the buffers of the save before instead of being a second
  // copy of the state while it ends. With checkpoint.async, serialising (at idle priority), sending and the writes
  // (file, fsync, rename, manifest, retention) run in the background. A failed write on any writer stops every rank
  // (checkpoint.on_error = fail) or is a warning (warn) when it is settled; each writer's copy is only ever replaced by
  // a complete newer one. eval_accuracy < 0: none.
  void save(const std::function<c10::impl::GenericDict()>& make_state, int64_t step, int64_t epoch,
            double eval_accuracy);
  // Waits for the save in flight (none without checkpoint.async), then every rank learns whether each writer
  // succeeded (on_error decides, as above) and rank 0 logs the file. Collective when a save is in flight, which every
  // rank knows alike; otherwise nothing.
  void settle();
  // Waits for a background write to end (no collective: a rank leaving on an error still completes its file).
  ~Checkpointer();
  // Collective: rank 0 cleans crash debris, picks the checkpoint checkpoint.resume names (auto: along the run's line,
  // past unreadable ones, each checked with `check`) and records the line it continues; every rank gets its dict.
  // With a copy on every node (and resume = auto or never), every node's writer does so in its own checkpoint.dir:
  // the newest step any node holds usable wins, its holder sends the bytes, and the writers that lack it write it.
  // nullopt: a fresh start. Throws when the named checkpoint cannot be used, every candidate was skipped, or two
  // nodes hold different checkpoints of the newest step.
  std::optional<Resumed> resume(const Check& check);
  // The state now in memory was read from the checkpoint of `step`. Read from this run's checkpoint.dir (resume =
  // auto, or a path inside it), it is already a checkpoint of the run's line: a run ending there writes it no second
  // time. Read from elsewhere (a path outside), the line holds nothing yet, and the run's end writes it there.
  void restored_at(int64_t step);

  int64_t written() const { return written_; }                       // checkpoints this run wrote
  const std::string& last_written() const { return last_written_; }  // the newest one's path; "" when none
  const std::string& dir() const { return cfg_.dir; }
  // Where checkpoints are written, for the banner: "rank 0's checkpoint.dir" or "a copy in each of N nodes'
  // checkpoint.dir" (as checkpoint.replicas resolves for this world).
  std::string replicas_text() const;

 private:
  // Whether every node's LOCAL_RANK 0 writes a copy, and whether this rank is a writer. Collective on the first call:
  // nodes whose checkpoint.dir turns out to be one shared folder (each writer's marker seen by another) fall back to
  // rank 0 alone, with a warning; otherwise rank 0 and the writers make their group (writers_group_).
  bool writes();
  struct Found;  // one folder's checkpoint to resume from, and the line it continues
  // One folder (this rank's checkpoint.dir): crash debris removed (and model.pt's, on rank 0), then the checkpoint
  // checkpoint.resume names: auto's newest usable one along the line (Found::skipped counts the others), a path's.
  // `say_missing`: whether `warn` hears of each step of the line without a manifest (never counted as skipped).
  Found find(const Check& check, const Log& warn, bool say_missing = true) const;
  // Records in latest.json the line that resuming from `found` continues (a fresh one when it holds nothing).
  void record_line(const Found& found) const;
  // Rank 0: the chosen checkpoint's path ("" for none), its bytes and parsed dict.
  std::string choose(std::vector<char>& bytes, c10::IValue& value, const Check& check);
  // resume() with a copy on every node: each writer finds its own, the newest step wins.
  std::optional<Resumed> resume_from_nodes(const Check& check);
  // Collective, in resume_from_nodes: rank 0 warns in one line when a node's latest.json names steps past `best`, the
  // newest step any node holds usable (-1: none), naming the node and the steps.
  void say_line_beyond(const Found& found, int64_t best) const;
  // Every rank learns whether a writer's `error` (its own, "" when none) happened: true when none did; otherwise
  // checkpoint.on_error decides, a warning (false) or an error naming the failing rank, `failed_text` first.
  bool settle_writes(const std::string& error, const std::string& failed_text) const;
  // A synchronous save (checkpoint.async = false) is settled before save() returns.
  void settle_unless_async();
  // A line or a warning about this rank's node's checkpoint folder: rank 0's through its console, another writer's on
  // its own standard error naming its node (rank 0 cannot see that node's files).
  void node_line(const std::string& line) const;
  void node_warning(const std::string& warning) const;
  // The checkpoint resume = PATH names, checked against its manifest when it has one.
  void read_named(const std::string& path, std::vector<char>& bytes, c10::IValue& value, const Check& check) const;

  CheckpointConfig cfg_;
  std::string out_dir_;
  DistContext ctx_;
  Log log_;
  Log warn_;
  // The last save until settle(): its step, this writer's outcome (the background write's, or "" / the error of a
  // synchronous one) and the warnings its store gave, which the training thread reports.
  struct InFlight {
    bool active = false;
    int64_t step = -1;
    bool writer = false;
    std::string error;
    std::future<std::string> background;
    std::chrono::steady_clock::time_point started;  // the background write's start
    std::shared_ptr<std::vector<std::string>> warnings = std::make_shared<std::vector<std::string>>();
  };
  InFlight in_flight_;
  bool node_copies_ = false;  // checkpoint.replicas resolved: a copy on every node
  bool writers_agreed_ = false;
  // With node copies, rank 0 and every node's writer: what the checkpoint's bytes travel over, so that they reach
  // the writers alone (a node of 8 ranks receives one copy, not 8). Null on the other ranks.
  c10::intrusive_ptr<c10d::Backend> writers_group_;
  int64_t last_step_ = -1;
  int64_t written_ = 0;
  std::string last_written_;
};

// "" when `bytes` parse as a checkpoint dict that `check` accepts (value = it), else why not.
std::string parse_checkpoint(const std::vector<char>& bytes, c10::IValue& value, const Checkpointer::Check& check);

}  // namespace ddp
