// Checkpointer: save (rank 0, or a writer on every node) and resume (rank 0), every rank agreeing on the outcome.
#include "checkpoint/checkpointer.h"

#include "base/atomic_file.h"
#include "base/first_line.h"
#include "base/python_kind.h"
#include "base/seconds_text.h"
#include "base/thread_name.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/final_outputs.h"
#include "checkpoint/hub_export.h"
#include "checkpoint/torch_save/pickle_reader.h"
#include "checkpoint/state_dict.h"
#include "config/row_choice.h"
#include "distributed/rank_zero.h"
#include "distributed/reduce.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <utility>

namespace ddp {
namespace {

// How long settle() waits for a background write before it says so: a write that takes this long is held up by the
// disk or by a host whose every core trains (its serialising runs at idle priority).
constexpr std::chrono::seconds kSlowSaveLine{10};

// The first tensor in `value` (dicts and lists searched) that is not in host memory, as its path ("optimizer/state/0/
// momentum_buffer on cuda:0"); "" when there is none. Reads metadata only, no device call.
std::string outside_host_memory(const c10::IValue& value, const std::string& at = "") {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return !t.defined() || t.device().is_cpu() ? "" : (at.empty() ? "" : at + " ") + "on " + t.device().str();
  }
  if (value.isList()) {
    const auto list = value.toListRef();
    for (size_t i = 0; i < list.size(); ++i)
      if (std::string w = outside_host_memory(list[i], at + "/" + std::to_string(i)); !w.empty()) return w;
  }
  if (value.isGenericDict())
    for (const auto& item : value.toGenericDict()) {
      const c10::IValue& k = item.key();
      const std::string key = k.isString() ? k.toStringRef() : k.isInt() ? std::to_string(k.toInt()) : python_kind(k);
      if (std::string w = outside_host_memory(item.value(), at.empty() ? key : at + "/" + key); !w.empty()) return w;
    }
  return "";
}

// Throws std::logic_error naming the first tensor of `state` outside host memory: the background thread that writes it
// must make no device call.
void require_host_memory(const c10::IValue& state) {
  if (const std::string where = outside_host_memory(state); !where.empty())
    throw std::logic_error("the checkpoint's state holds a tensor outside host memory (" + where + ")");
}

// The line a run continues from the checkpoint of `step`: that step, then the older ones of the line it came from
// (`recorded`, latest.json's), or, in a folder of ddptrain 0.3.0 or before (none recorded), every older one.
std::vector<int64_t> line_from(int64_t step, const std::optional<std::vector<int64_t>>& recorded,
                               const std::vector<CheckpointInfo>& complete) {
  std::vector<int64_t> line{step};
  if (recorded && std::find(recorded->begin(), recorded->end(), step) != recorded->end()) {
    for (int64_t s : *recorded)
      if (s < step) line.push_back(s);
  } else if (!recorded) {
    for (const auto& c : complete)
      if (c.step < step) line.push_back(c.step);
  }
  return line;
}

// 1 + the highest rank whose `error` is not empty, agreed by every rank, minus 1: -1 when none failed.
int64_t failed_rank(const DistContext& ctx, const std::string& error) {
  return static_cast<int64_t>(all_reduce_max(ctx, error.empty() ? 0.0 : 1.0 + static_cast<double>(ctx.rank))) - 1;
}

// The lowest rank for which `mine` is true (it must be true on one rank at least), agreed by every rank.
int64_t lowest_rank(const DistContext& ctx, bool mine) {
  const double from_top = all_reduce_max(ctx, mine ? static_cast<double>(ctx.world_size - ctx.rank) : 0.0);
  return ctx.world_size - static_cast<int64_t>(from_top);
}

// A 52-bit FNV-1a digest of `bytes`: exact as a double, so ranks can compare theirs with an all-reduce.
double bytes_digest(const std::vector<char>& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<double>(h & ((uint64_t{1} << 52) - 1));
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("(unknown)");
}

}  // namespace

// One folder's checkpoint to resume from (path "" and step -1: none), and the line resuming from it continues.
struct Checkpointer::Found {
  std::string path;
  int64_t step = -1;
  CheckpointInfo info;  // its manifest (auto)
  std::vector<char> bytes;
  c10::IValue value;                             // parsed and checked
  std::optional<std::vector<int64_t>> recorded;  // the line latest.json held
  std::vector<int64_t> line;
  int64_t skipped = 0;  // auto: candidates passed over as unusable
};

std::string parse_checkpoint(const std::vector<char>& bytes, c10::IValue& value, const Checkpointer::Check& check) {
  try {
    value = read_torch_save(bytes);
  } catch (const std::exception& e) {
    return "not a readable checkpoint: " + first_line(e.what());
  }
  if (!value.isGenericDict()) return "not a checkpoint dict (torch.load gives " + python_kind(value) + ")";
  return check(value.toGenericDict());
}

Checkpointer::Checkpointer(CheckpointConfig cfg, std::string out_dir, DistContext ctx, Log log, Log warn)
    : cfg_(std::move(cfg)),
      out_dir_(std::move(out_dir)),
      ctx_(std::move(ctx)),
      log_(std::move(log)),
      warn_(std::move(warn)) {
  // torchrun's variables say how many nodes there are: LOCAL_WORLD_SIZE ranks on each, whatever the host names.
  const bool nodes = ctx_.world_size > 1 && ctx_.local_world_size < ctx_.world_size;
  node_copies_ = cfg_.replicas == CheckpointReplicas::Node ? ctx_.world_size > 1
                                                           : cfg_.replicas == CheckpointReplicas::Auto && nodes;
}

std::string Checkpointer::replicas_text() const {
  if (!node_copies_) return "rank 0's checkpoint.dir";
  const int64_t nodes = (ctx_.world_size + ctx_.local_world_size - 1) / ctx_.local_world_size;
  return "a copy in each of " + std::to_string(nodes) + " nodes' checkpoint.dir (checkpoint.replicas = \"" +
         choice_name(cfg_.replicas) + "\")";
}

bool Checkpointer::writes() {
  if (!node_copies_) return ctx_.is_main();
  if (!writers_agreed_) {
    writers_agreed_ = true;
    // Each writer leaves a marker named by its rank and holding this run's nonce (rank 0's), then looks for another
    // writer's: a folder two nodes share (a shared filesystem) must not be written by both at once.
    std::vector<char> nonce;
    if (ctx_.is_main()) {
      const std::string n = std::to_string(std::random_device{}()) + "-" + std::to_string(::getpid());
      nonce.assign(n.begin(), n.end());
    }
    broadcast_bytes(ctx_, nonce);
    const std::string token(nonce.begin(), nonce.end());
    const bool candidate = ctx_.local_rank == 0;
    const std::filesystem::path marker = std::filesystem::path(cfg_.dir) / (".writer-" + std::to_string(ctx_.rank));
    double seen = 0;  // 1 + the rank of another writer whose marker this one sees
    if (candidate) {
      std::error_code ec;
      std::filesystem::create_directories(cfg_.dir, ec);
      try {
        write_file_atomic(marker.string(), nonce);
      } catch (const std::exception&) {
        // A folder this writer cannot write fails at its first save, where checkpoint.on_error decides.
      }
    }
    all_reduce_max(ctx_, 0);  // every marker is written
    if (candidate) {
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(cfg_.dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(".writer-", 0) != 0 || entry.path() == marker) continue;
        std::ifstream in(entry.path());
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (text == token) seen = std::max(seen, 1 + std::strtod(name.c_str() + 8, nullptr));
      }
    }
    const double shared = all_reduce_max(ctx_, seen);  // every marker is read
    if (candidate) {
      std::error_code ec;
      std::filesystem::remove(marker, ec);
    }
    if (shared > 0) {
      node_copies_ = false;
      if (ctx_.is_main())
        warn_("checkpoint.replicas: the nodes' checkpoint.dir " + cfg_.dir + " is one shared folder (rank " +
              std::to_string(static_cast<int64_t>(shared) - 1) +
              "'s node sees it too), so rank 0 alone writes the checkpoints");
      return ctx_.is_main();
    }
    std::vector<int64_t> writer_flags(static_cast<size_t>(ctx_.world_size), 0);
    writer_flags[static_cast<size_t>(ctx_.rank)] = candidate || ctx_.is_main() ? 1 : 0;
    writer_flags = all_reduce_sum_exact(ctx_, writer_flags);
    std::vector<int64_t> members;  // rank 0 first: it serialises and sends
    for (size_t r = 0; r < writer_flags.size(); ++r)
      if (writer_flags[r] > 0) members.push_back(static_cast<int64_t>(r));
    if (candidate || ctx_.is_main()) writers_group_ = ctx_.member_group(members, "checkpoint_writers");
  }
  return node_copies_ ? ctx_.local_rank == 0 : ctx_.is_main();
}

void Checkpointer::save(const std::function<c10::impl::GenericDict()>& make_state, int64_t step, int64_t epoch,
                        double eval_accuracy) {
  settle();
  const c10::impl::GenericDict state = make_state();
  last_step_ = step;
  const bool writer = writes();
  in_flight_ = InFlight{};
  in_flight_.active = true;
  in_flight_.step = step;
  in_flight_.writer = writer;
  if (!writer && !writers_group_) return settle_unless_async();
  // Rank 0 serialises once; with copies on the nodes every writer gets the same bytes, over the writers' own group
  // (the other ranks receive none). `state`'s tensors are copies (Trainer::state_dict), so the bytes are the state
  // as of this step whatever training does meanwhile. Neither part throws: a failure is returned as its text.
  using Made = std::pair<std::vector<char>, std::string>;  // the bytes, or why rank 0 could not make them
  // In the background, the CPU work (serialising, copying the bytes into the staging buffers, the CRC32s) runs at idle
  // priority: it then fills the time training leaves instead of being taken from the training threads of a host whose
  // every core trains. The system calls run on the background thread itself, at normal priority: an idle thread
  // preempted while it holds a filesystem's journal handle would hold up the training threads' own file writes.
  const Producer producer = cfg_.async ? Producer::IdleThread : Producer::ThisThread;
  auto make_bytes = [state = ctx_.is_main() ? std::optional<c10::impl::GenericDict>(state) : std::nullopt,
                     group = writers_group_, producer]() mutable -> Made {
    Made made;
    if (state) {
      try {
        require_host_memory(*state);
        made.first = producer == Producer::ThisThread
                         ? torch_save_bytes(*state)
                         : start_in_idle_time("ddp-serialise", [&] { return torch_save_bytes(*state); }).get();
      } catch (const std::exception& e) {
        made.second = e.what();
      }
      state.reset();  // the copies' memory goes once the bytes are made
    }
    try {
      if (group) broadcast_bytes(*group, made.first);
    } catch (const std::exception& e) {
      // Rank 0's serialising failure, where it had one, stays the reason: the sending only followed from it.
      if (made.second.empty()) made.second = "sending the checkpoint to the nodes' writers: " + first_line(e.what());
    }
    return made;
  };
  // Only the store's files and the captured values are touched off the training thread; warnings wait for settle().
  auto write = [store = CheckpointStore(cfg_.dir, cfg_.keep_last, cfg_.keep_best), writer, step, epoch, eval_accuracy,
                warnings = in_flight_.warnings, producer](Made made) mutable -> std::string {
    if (!made.second.empty()) return made.second;  // rank 0's own failure, or the sending's
    if (!writer) return "";
    if (made.first.empty()) return "rank 0 could not serialise the checkpoint";
    try {
      store.save(
          made.first, step, epoch, eval_accuracy, [&](const std::string& w) { warnings->push_back(w); }, producer);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  std::function<std::string()> job = [make_bytes = std::move(make_bytes), write]() mutable {
    return write(make_bytes());
  };
  if (!writers_group_ && ctx_.is_main()) {
    // Rank 0 writes alone: the bytes go into the file as they are made, their CRC32 counted on the way, so the
    // checkpoint is never whole in memory and no pass reads it again. The file is the same bytes.
    job = [state = std::optional<c10::impl::GenericDict>(state),
           store = CheckpointStore(cfg_.dir, cfg_.keep_last, cfg_.keep_best), step, epoch, eval_accuracy,
           warnings = in_flight_.warnings, producer]() mutable -> std::string {
      std::string error;
      try {
        require_host_memory(*state);
        store.save([&](const ByteSink& sink) { write_torch_save(sink, *state); }, step, epoch, eval_accuracy,
                   [&](const std::string& w) { warnings->push_back(w); }, producer);
      } catch (const std::exception& e) {
        error = e.what();
      }
      state.reset();  // the copies' memory goes once the file is written
      return error;
    };
  }
  // The state is in host memory (host_copy), so the background threads make no device call, which a CUDA graph's
  // capture on the training thread would forbid; settle() waits for whatever is left.
  if (!cfg_.async) {
    in_flight_.error = job();
  } else {
    in_flight_.started = std::chrono::steady_clock::now();
    in_flight_.background = std::async(std::launch::async, [job = std::move(job)]() mutable {
      name_this_thread("ddp-checkpoint");
      return job();
    });
  }
  settle_unless_async();
}

void Checkpointer::settle_unless_async() {
  if (!cfg_.async) settle();
}

void Checkpointer::settle() {
  if (!in_flight_.active) return;
  in_flight_.active = false;
  if (in_flight_.background.valid() && in_flight_.background.wait_for(kSlowSaveLine) == std::future_status::timeout) {
    node_line("waiting for the checkpoint of step " + std::to_string(in_flight_.step) + " to finish writing (started " +
              std::to_string(std::lround(seconds_since(in_flight_.started))) + " s ago)");
  }
  std::string error = in_flight_.background.valid() ? in_flight_.background.get() : in_flight_.error;
  for (const std::string& w : *in_flight_.warnings) node_warning(w);
  const int64_t step = in_flight_.step;
  const std::string path = CheckpointStore(cfg_.dir, cfg_.keep_last, cfg_.keep_best).payload_path(step);
  if (in_flight_.writer && error.empty()) {
    if (ctx_.is_main()) log_("checkpoint " + path + (node_copies_ ? " (and a copy on every node)" : ""));
    ++written_;
  }
  if (settle_writes(error, "checkpoint at step " + std::to_string(step) + " failed")) last_written_ = path;
}

void Checkpointer::node_line(const std::string& line) const {
  if (ctx_.is_main())
    log_(line);
  else
    std::cerr << "rank " << ctx_.rank << "'s node: " << line << std::endl;
}

void Checkpointer::node_warning(const std::string& warning) const {
  if (ctx_.is_main())
    warn_(warning);
  else
    std::cerr << "warning: rank " << ctx_.rank << "'s node: " << warning << std::endl;
}

Checkpointer::~Checkpointer() {
  if (in_flight_.background.valid()) in_flight_.background.wait();
}

bool Checkpointer::settle_writes(const std::string& error, const std::string& failed_text) const {
  const int64_t failed = failed_rank(ctx_, error);
  if (failed < 0) return true;
  const std::string what = failed_text + (failed == 0 ? "" : " on rank " + std::to_string(failed) + "'s node");
  const std::string intact = " (earlier checkpoints are intact)";
  if (cfg_.on_error == OnCheckpointError::Warn) {
    if (ctx_.is_main()) warn_(what + (error.empty() ? " (see that rank's output)" : ": " + error) + intact);
    if (!error.empty() && !ctx_.is_main())
      std::cerr << "warning: " << what << ": " << error << intact << std::endl;  // the writer's own cause
    return false;
  }
  if (!error.empty()) throw std::runtime_error(what + ": " + error + intact);
  throw std::runtime_error(ctx_.is_main() ? what + " (see that rank's output)" + intact
                                          : "rank " + std::to_string(failed) + " failed to write a checkpoint");
}

void Checkpointer::restored_at(int64_t step) {
  // Decided from the config alone, so that every rank decides alike (only rank 0 read the file).
  const auto folder = [](const std::string& p) { return std::filesystem::absolute(p).lexically_normal(); };
  const bool elsewhere = cfg_.resume.mode == ResumeMode::Path &&
                         folder(cfg_.resume.path).parent_path() != folder(cfg_.dir + "/").parent_path();
  if (!elsewhere) last_step_ = step;
}

std::optional<Checkpointer::Resumed> Checkpointer::resume(const Check& check) {
  if (enabled() && node_copies_) writes();  // collective: whether the nodes' folders are one shared folder
  if (enabled() && node_copies_ && cfg_.resume.mode != ResumeMode::Path) return resume_from_nodes(check);
  std::vector<char> bytes;
  c10::IValue value;  // rank 0: the chosen checkpoint, parsed and checked while choosing
  std::string chosen;
  const RankZeroOutcome r = on_rank_zero(ctx_, [&] { chosen = choose(bytes, value, check); });
  if (r.failed) {
    if (!ctx_.is_main()) throw std::runtime_error("rank 0 could not read the checkpoint");
    throw std::runtime_error(r.error.rfind("resume from ", 0) == 0 ? r.error : "resume: " + r.error);
  }
  broadcast_bytes(ctx_, bytes);
  if (bytes.empty()) return std::nullopt;
  if (!ctx_.is_main()) {
    const std::string problem = parse_checkpoint(bytes, value, check);
    if (!problem.empty()) throw std::runtime_error("resume from rank 0's checkpoint: " + problem);
  }
  return Resumed{chosen, value.toGenericDict()};
}

std::optional<Checkpointer::Resumed> Checkpointer::resume_from_nodes(const Check& check) {
  const bool writer = ctx_.local_rank == 0;
  std::set<std::string> said;
  const Log warn = [&](const std::string& w) {
    if (said.insert(w).second) node_warning(w);
  };
  Found found;
  std::string error;
  if (writer) {
    try {
      // A step of a node's line whose manifest is missing is said once for the job (say_line_beyond), not once per
      // step and node.
      found = find(check, warn, /*say_missing=*/false);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (const int64_t failed = failed_rank(ctx_, error); failed >= 0) {
    if (!error.empty()) throw std::runtime_error(error.rfind("resume from ", 0) == 0 ? error : "resume: " + error);
    throw std::runtime_error("rank " + std::to_string(failed) + " could not read its node's checkpoints");
  }
  // The newest step any node holds usable; -1: none.
  const auto best = static_cast<int64_t>(all_reduce_max(ctx_, static_cast<double>(found.step)));
  say_line_beyond(found, best);
  if (best < 0) {
    const int64_t skipped = all_reduce_sum_exact(ctx_, {found.skipped})[0];
    if (skipped > 0)
      throw std::runtime_error("no usable checkpoint in any node's " + cfg_.dir + " (" + std::to_string(skipped) +
                               " skipped, see the warnings above); move them away or set checkpoint.resume = never "
                               "or to a checkpoint file");
    if (writer) record_line(found);
    return std::nullopt;
  }
  // Nodes holding that step must hold the same bytes: two lines that reached the same step (a job split in two, a
  // folder copied between runs) are the user's to settle, never a silent pick.
  const bool holds = writer && found.step == best;
  const double digest = holds ? bytes_digest(found.bytes) : -1;
  const double hi = all_reduce_max(ctx_, digest);
  const double lo = -all_reduce_max(ctx_, holds ? -digest : -std::numeric_limits<double>::max());
  const int64_t holder = lowest_rank(ctx_, holds && digest == hi);
  const auto where = [&](int64_t rank) {  // collective: where `rank` found its checkpoint
    std::vector<char> text;
    if (ctx_.rank == rank) {
      const std::string t = found.path + " on host " + host_name() + " (rank " + std::to_string(rank) + "'s node)";
      text.assign(t.begin(), t.end());
    }
    broadcast_bytes(ctx_, text, rank);
    return std::string(text.begin(), text.end());
  };
  if (hi != lo) {
    const std::string a = where(holder), b = where(lowest_rank(ctx_, holds && digest == lo));
    throw std::runtime_error("two different checkpoints of step " + std::to_string(best) + ": " + a + " and " + b +
                             " (two runs reached the same step); move one run's checkpoints away, or set "
                             "checkpoint.resume to the file to continue from");
  }
  const std::string from = where(holder);
  std::vector<char> bytes = ctx_.rank == holder ? std::move(found.bytes) : std::vector<char>{};
  broadcast_bytes(ctx_, bytes, holder);
  const auto held = [&](double mine) {  // the holder's figure, on every rank
    return all_reduce_max(ctx_, ctx_.rank == holder ? mine : -std::numeric_limits<double>::infinity());
  };
  const auto epoch = static_cast<int64_t>(held(static_cast<double>(found.info.epoch)));
  const double eval_accuracy = held(found.info.eval_accuracy);
  c10::IValue value = found.value;
  const std::string problem = ctx_.rank == holder ? "" : parse_checkpoint(bytes, value, check);
  if (const int64_t bad = failed_rank(ctx_, problem); bad >= 0)
    throw std::runtime_error("resume from " + from + ": " +
                             (problem.empty() ? "rank " + std::to_string(bad) + " cannot use it" : problem));
  // Writers without it (none, an older one, a corrupt copy) write it, so that every node holds the newest again.
  int64_t copied = 0;
  if (writer) {
    try {
      if (found.step < best) {
        CheckpointStore(cfg_.dir, cfg_.keep_last, cfg_.keep_best).save(bytes, best, epoch, eval_accuracy, warn);
        copied = 1;
      } else {
        record_line(found);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  copied = all_reduce_sum_exact(ctx_, {copied})[0];
  settle_writes(error, "copying the checkpoint of step " + std::to_string(best) + " from " + from + " failed");
  if (copied > 0 && ctx_.is_main())
    log_("wrote the checkpoint of step " + std::to_string(best) + " to " + std::to_string(copied) +
         (copied == 1 ? " node" : " nodes") + " that lacked it");
  return Resumed{from, value.toGenericDict()};
}

void Checkpointer::say_line_beyond(const Found& found, int64_t best) const {
  std::vector<int64_t> beyond;  // the steps this node's latest.json names past `best`: no node holds them usable
  if (ctx_.local_rank == 0 && found.recorded)
    std::copy_if(found.recorded->begin(), found.recorded->end(), std::back_inserter(beyond),
                 [best](int64_t step) { return step > best; });
  std::sort(beyond.begin(), beyond.end());
  const auto newest = static_cast<int64_t>(
      all_reduce_max(ctx_, beyond.empty() ? -1.0 : static_cast<double>(beyond.back())));  // collective
  if (newest < 0) return;
  const int64_t namer = lowest_rank(ctx_, !beyond.empty() && beyond.back() == newest);
  std::vector<char> text;
  if (ctx_.rank == namer) {
    std::vector<std::string> steps;
    for (const int64_t step : beyond) steps.push_back(std::to_string(step));
    const std::string t = cfg_.dir + "/latest.json on host " + host_name() + " (rank " + std::to_string(namer) +
                          "'s node) names " + (steps.size() == 1 ? "step " : "steps ") + spoken_list(steps, "and") +
                          ", which no node holds usable";
    text.assign(t.begin(), t.end());
  }
  broadcast_bytes(ctx_, text, namer);
  if (ctx_.is_main())
    warn_(std::string(text.begin(), text.end()) +
          (best < 0 ? ": starting from step 0" : ": resuming from step " + std::to_string(best)));
}

void Checkpointer::read_named(const std::string& path, std::vector<char>& bytes, c10::IValue& value,
                              const Check& check) const {
  const std::string manifest = std::filesystem::path(path).replace_extension(".json").string();
  if (auto info = CheckpointStore::read_manifest(manifest)) {
    info->payload_path = path;  // the manifest's size and CRC, checked against this file
    const std::string problem = CheckpointStore::verify(*info);
    if (!problem.empty()) throw std::runtime_error(problem);
  }
  bytes = read_bytes(path);
  const std::string problem = parse_checkpoint(bytes, value, check);
  if (!problem.empty()) throw std::runtime_error("resume from " + path + ": " + problem);
}

Checkpointer::Found Checkpointer::find(const Check& check, const Log& warn, bool say_missing) const {
  CheckpointStore store(cfg_.dir, cfg_.keep_last, cfg_.keep_best);
  // What a crash mid-write left (this folder's writer is the only one; other runs must not share it).
  const std::string named = cfg_.resume.mode == ResumeMode::Path ? cfg_.resume.path : "";
  for (const auto& p : store.remove_debris(named)) node_line("removed " + p + " (left by an interrupted write)");
  if (ctx_.is_main())
    for (const std::string& name : FinalOutputs::names())
      for (const auto& p : remove_temp_files(out_dir_, name)) log_("removed " + p + " (left by an interrupted write)");
  Found found;
  found.recorded = store.read_line(warn);
  const std::vector<CheckpointInfo> complete = store.list(warn);  // also says which manifests cannot be read
  if (cfg_.resume.mode == ResumeMode::Auto) {
    const Log counted = [&](const std::string& w) {
      warn(w);
      ++found.skipped;
    };
    const CheckpointStore::Candidates candidates = store.resume_candidates(counted);
    if (say_missing)
      for (int64_t step : candidates.missing) warn(store.missing_from_line(step));
    for (const auto& c : candidates.usable) {
      std::vector<char> b = read_bytes(c.payload_path);
      const std::string problem = parse_checkpoint(b, found.value, check);
      if (problem.empty()) {
        found.path = c.payload_path;
        found.step = c.step;
        found.info = c;
        found.bytes = std::move(b);
        found.line = line_from(c.step, found.recorded, complete);
        return found;
      }
      counted("skipping checkpoint " + c.payload_path + ": " + problem + " (left in place)");
    }
    found.value = c10::IValue();
  } else if (cfg_.resume.mode == ResumeMode::Path) {
    found.path = cfg_.resume.path;
    read_named(found.path, found.bytes, found.value, check);
    if (auto step = store.step_of(found.path)) found.line = line_from(*step, found.recorded, complete);
  }
  return found;
}

void Checkpointer::record_line(const Found& found) const {
  // latest.json names the line auto follows from now on (a fresh line for never or a checkpoint from elsewhere).
  std::error_code ec;
  if ((!found.line.empty() || std::filesystem::is_directory(cfg_.dir, ec)) &&
      (!found.recorded || *found.recorded != found.line))
    CheckpointStore(cfg_.dir, cfg_.keep_last, cfg_.keep_best).write_line(found.line);
}

std::string Checkpointer::choose(std::vector<char>& bytes, c10::IValue& value, const Check& check) {
  std::set<std::string> said;  // each warning once (a listing and the line may both find an unreadable manifest)
  const Log warn = [&](const std::string& w) {
    if (said.insert(w).second) warn_(w);
  };
  Found found = find(check, warn);
  if (cfg_.resume.mode == ResumeMode::Auto && found.path.empty() && found.skipped > 0)
    throw std::runtime_error("no usable checkpoint in " + cfg_.dir + " (" + std::to_string(found.skipped) +
                             " skipped, see the warnings above); move them away or set checkpoint.resume = never "
                             "or to a checkpoint file");
  record_line(found);
  bytes = std::move(found.bytes);
  value = found.value;
  return found.path;
}

}  // namespace ddp
