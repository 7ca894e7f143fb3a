// HangWatch's thread: the roll-call through the store, rank 0's verdict over what the ranks posted, and a failed
// rank's error ending the ranks that wait for it.
#include "distributed/hang_watch.h"

#include "base/atomic_file.h"
#include "base/thread_name.h"
#include "distributed/proc_stat.h"
#include "distributed/store_notice.h"
#include "distributed/thread_stack.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

namespace ddp {
namespace {

const std::string kRequestKey = "ddptrain/hang/request";
std::string report_key(int64_t rank) { return "ddptrain/hang/report/" + std::to_string(rank); }
// A failed rank's number and error line (a notice: its readers are counted beside it).
const std::string kRankFailedKey = "ddptrain/failed";
constexpr size_t kRankFailedLineMax = 2048;

// Every rank looks for a failure and a request this often: 4 ms per rank, at least 0.5 s, so that rank 0's store
// answers at most 500 such checks a second whatever the world.
std::chrono::milliseconds poll_interval(int64_t world_size) {
  return std::chrono::milliseconds(std::max<int64_t>(500, 4 * world_size));
}
constexpr auto kCollect = std::chrono::seconds(5);  // how long rank 0 waits for the posts, beyond one poll
constexpr auto kStackWait = std::chrono::milliseconds(500);
// Each other thread's time to answer: one that blocks the signal costs this; one on a loaded machine (a hang is often
// reported while the other ranks' processes keep the cores busy) needs the scheduler to run it within it.
constexpr auto kOtherThreadWait = std::chrono::milliseconds(200);
constexpr size_t kOtherStacks = 16;          // distinct stacks posted besides the training thread's
constexpr size_t kNamedThreads = 8;          // threads named per stack
constexpr const char* kThreadsMark = "== ";  // begins another thread's section in a post

std::string rounded_seconds(double s) { return std::to_string(static_cast<int64_t>(s + 0.5)) + " s"; }

std::string rank_list(const std::vector<int64_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

std::string place(const std::vector<RankView>& views, int64_t rank) {
  const auto i = static_cast<size_t>(rank);
  return i < views.size() ? " (" + place_of(views[i]) + ")" : "";
}

// In the gradient all-reduce, a rank has started one collective per bucket, in bucket order (c10d::Reducer launches
// bucket i + 1 only after bucket i), the last `buckets` of its count. The one it waits for is the first that the rank
// furthest behind has not started: "; waiting for collective #1647, gradient bucket 0 of 5".
std::string waited_bucket(const Activity::Snapshot& a, uint64_t fewest) {
  if (a.phase != Phase::kGradientAllReduce || a.buckets <= 0) return "";
  const auto buckets = static_cast<uint64_t>(a.buckets);
  if (a.collectives < buckets || fewest < a.collectives - buckets || fewest >= a.collectives) return "";
  return "; waiting for collective #" + std::to_string(fewest + 1) + ", gradient bucket " +
         std::to_string(fewest - (a.collectives - buckets)) + " of " + std::to_string(buckets);
}

}  // namespace

std::string hang_report_text(const Activity::Snapshot& s, const std::vector<std::string>& stack,
                             const std::vector<ThreadStacks>& other_threads) {
  std::string text = std::to_string(s.step) + " " + std::to_string(static_cast<int>(s.phase)) + " " +
                     std::to_string(s.seconds) + " " + std::to_string(s.collectives) + " " + std::to_string(s.buckets);
  for (const auto& frame : stack) text += "\n" + frame;
  for (const ThreadStacks& group : other_threads) {
    text += std::string("\n") + kThreadsMark + (group.tids.size() == 1 ? "thread " : "threads ");
    for (size_t i = 0; i < group.tids.size() && i < kNamedThreads; ++i)
      text += (i ? ", " : "") + std::to_string(group.tids[i]) + " (" + group.names[i] + ")";
    if (group.tids.size() > kNamedThreads)
      text += " and " + std::to_string(group.tids.size() - kNamedThreads) + " more";
    text += group.frames.empty() ? ": (no stack: did not answer)" : ":";
    for (const auto& frame : group.frames) text += "\n  " + frame;
  }
  return text;
}

std::optional<HangReport> parse_hang_report(int64_t rank, const std::string& text) {
  std::istringstream in(text);
  std::string first;
  std::getline(in, first);
  std::istringstream head(first);
  HangReport r;
  r.rank = rank;
  Activity::Snapshot& s = r.activity;
  int phase = -1;
  if (!(head >> s.step >> phase >> s.seconds >> s.collectives >> s.buckets)) return std::nullopt;
  if (phase < 0 || phase > static_cast<int>(Phase::kFinish) || s.buckets < 0) return std::nullopt;
  s.phase = static_cast<Phase>(phase);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kThreadsMark, 0) == 0)
      line = line.substr(std::string(kThreadsMark).size());
    else if (r.other_threads.empty()) {
      r.stack.push_back(line);
      continue;
    }
    r.other_threads.push_back(line);
  }
  return r;
}

std::string silent_rank_state(const RankView& view) {
  if (!pid_visible(view)) return "";
  char state = 0;
  if (process_start_time(view.pid, &state) == 0 || !rank_process_alive(view)) return "exited";
  if (state == 'T' || state == 't') return "stopped (SIGSTOP or a debugger)";
  return "";
}

std::string hang_verdict(const std::vector<HangReport>& reports, int64_t world_size, const std::vector<RankView>& views,
                         const std::function<std::string(int64_t)>& silent) {
  int64_t step = 0;
  // Ranks alike (phase, step, collectives started) in one group, waiting ones first, each group in rank order.
  std::map<std::tuple<bool, int, int64_t, uint64_t>, std::vector<const HangReport*>> groups;
  std::vector<bool> answered(static_cast<size_t>(world_size), false);
  uint64_t fewest = UINT64_MAX;  // collectives started by the rank furthest behind
  for (const auto& r : reports) {
    step = std::max(step, r.activity.step);
    fewest = std::min(fewest, r.activity.collectives);
    if (r.rank >= 0 && r.rank < world_size) answered[static_cast<size_t>(r.rank)] = true;
    groups[{!waits_for_peers(r.activity.phase), static_cast<int>(r.activity.phase), r.activity.step,
            r.activity.collectives}]
        .push_back(&r);
  }
  std::vector<std::string> parts;
  for (const auto& [key, members] : groups) {
    const Activity::Snapshot& a = members.front()->activity;
    double longest = 0;
    std::vector<int64_t> ranks;
    for (const HangReport* m : members) {
      ranks.push_back(m->rank);
      longest = std::max(longest, m->activity.seconds);
    }
    const bool waiting = !std::get<0>(key);
    const std::string counts =
        "step " + std::to_string(a.step) + ", collectives started: " + std::to_string(a.collectives);
    if (waiting) {
      parts.push_back(rank_list(ranks) + (ranks.size() == 1 ? " waits" : " wait") + " in " + phase_name(a.phase) +
                      " for " + rounded_seconds(longest) + " (" + counts + waited_bucket(a, fewest) + ")");
    } else {
      for (const int64_t r : ranks)  // the ranks the others wait for: each with its host and pid
        parts.push_back("rank " + std::to_string(r) + place(views, r) + " is in " + phase_name(a.phase) + " for " +
                        rounded_seconds(longest) + " (" + counts + ")");
    }
  }
  for (int64_t r = 0; r < world_size; ++r) {
    if (answered[static_cast<size_t>(r)]) continue;
    const std::string why = silent(r);
    parts.push_back("rank " + std::to_string(r) + place(views, r) + " does not answer" +
                    (why.empty() ? "" : ": " + why));
  }
  std::string out = "hang at step " + std::to_string(step) + ": ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

struct HangWatch::State {
  int64_t rank = 0, world_size = 1;
  double report_after_s = 0;
  std::shared_ptr<Activity> activity;
  c10::intrusive_ptr<c10d::Store> store;
  std::vector<RankView> views;
  std::string stacks_dir;
  Say say, fail;

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false, finished = false;

  // Sleeps up to `d`; false once stopping.
  bool sleep(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex);
    return !wake.wait_for(lock, d, [&] { return stopping; });
  }

  void run() {
    name_this_thread("ddp-hang-watch");
    try {
      watch();
    } catch (const std::exception&) {
      // The store is gone (rank 0 ended, or the job is ending): nothing left to report through.
    }
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
    wake.notify_all();
  }

  void watch() {
    const auto poll = poll_interval(world_size);
    bool reported = false;  // a rank posts where it is once; rank 0 says one verdict
    for (;;) {
      if (!sleep(poll)) return;
      if (store->check({kRankFailedKey})) return follow_failure(poll);
      if (reported) continue;
      // Until asked (or until this rank has waited too long and asks), then post once.
      const Activity::Snapshot now = activity->snapshot();
      if (waits_for_peers(now.phase) && now.seconds > report_after_s && !store->check({kRequestKey}))
        store->set(kRequestKey, std::to_string(rank));
      if (store->check({kRequestKey})) {
        if (!report(poll)) return;
        reported = true;
      }
    }
  }

  // Reads the failure another rank posted, counts this rank as having read it (the store may go with the failed
  // rank from here), and ends this rank once it has stayed a whole poll in a collective (its own work, a checkpoint
  // being written, goes on until it waits for its peers; a collective that fails on its own leaves the phase first).
  void follow_failure(std::chrono::milliseconds poll) {
    const std::string text = read_notice(*store, kRankFailedKey);
    const size_t eol = text.find('\n');
    const int64_t failed = std::strtoll(text.c_str(), nullptr, 10);
    const std::string message = "rank " + std::to_string(failed) + place(views, failed) +
                                " failed: " + (eol == std::string::npos ? text : text.substr(eol + 1));
    Activity::Snapshot since = activity->snapshot();
    const double poll_s = std::chrono::duration<double>(poll).count();
    for (;;) {
      if (!sleep(poll)) return;
      const Activity::Snapshot now = activity->snapshot();
      const bool stayed = now.phase == since.phase && now.step == since.step && now.collectives == since.collectives &&
                          now.seconds >= since.seconds + 0.9 * poll_s;
      if (!stayed) {
        since = now;
        continue;
      }
      if (!waits_for_peers(now.phase)) continue;
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return;  // this rank's own error is on its way
      fail(message);
      return;
    }
  }

  // Posts this rank's report; rank 0 collects every rank's and says the verdict. False once stopping.
  bool report(std::chrono::milliseconds poll) {
    const Activity::Snapshot snapshot = activity->snapshot();
    const std::vector<std::string> stack = stack_of_watched_thread(kStackWait);
    const std::string text = hang_report_text(snapshot, stack, stacks_of_other_threads(kOtherThreadWait, kOtherStacks));
    store->set(report_key(rank), std::vector<uint8_t>(text.begin(), text.end()));
    if (rank != 0) return true;
    std::vector<std::string> keys;
    for (int64_t r = 0; r < world_size; ++r) keys.push_back(report_key(r));
    const auto until = std::chrono::steady_clock::now() + kCollect + poll;  // every rank has looked by then
    while (!store->check(keys) && std::chrono::steady_clock::now() < until)
      if (!sleep(std::chrono::milliseconds(500))) return false;
    std::vector<HangReport> reports;
    for (int64_t r = 0; r < world_size; ++r) {
      if (!store->check({report_key(r)})) continue;
      const auto bytes = store->get(report_key(r));
      if (auto report = parse_hang_report(r, std::string(bytes.begin(), bytes.end())))
        reports.push_back(std::move(*report));
    }
    const std::string verdict = hang_verdict(reports, world_size, views, [this](int64_t r) {
      return static_cast<size_t>(r) < views.size() ? silent_rank_state(views[static_cast<size_t>(r)]) : "";
    });
    say(verdict + write_stacks(verdict, reports));
    return true;
  }

  // " (each rank's stack: PATH)", or "" when the file cannot be written.
  std::string write_stacks(const std::string& verdict, const std::vector<HangReport>& reports) const {
    int64_t step = 0;
    std::string text = verdict + "\n";
    for (const auto& r : reports) {
      step = std::max(step, r.activity.step);
      text +=
          "\nrank " + std::to_string(r.rank) + place(views, r.rank) + ", in " + phase_name(r.activity.phase) + ":\n";
      for (const auto& frame : r.stack) text += "  " + frame + "\n";
      if (r.stack.empty()) text += "  (no stack: the training thread did not answer)\n";
      if (!r.other_threads.empty()) text += "  its other threads:\n";
      for (const auto& line : r.other_threads) text += "    " + line + "\n";
    }
    const std::string path = stacks_dir + "/step-" + std::to_string(step) + ".txt";
    try {
      std::filesystem::create_directories(stacks_dir);
      write_file_atomic(path, std::vector<char>(text.begin(), text.end()));
    } catch (const std::exception&) {
      return "";
    }
    return " (each rank's stack: " + path + ")";
  }
};

void tell_peers_of_failure(const DistContext& ctx, const std::string& line) {
  if (!ctx.distributed()) return;
  post_notice(ctx.watch_store, kRankFailedKey, std::to_string(ctx.rank) + "\n" + line.substr(0, kRankFailedLineMax),
              ctx.world_size, ctx.serves_store, poll_interval(ctx.world_size));
}

std::unique_ptr<HangWatch> HangWatch::start(const DistContext& ctx, double report_after_s, std::string stacks_dir,
                                            Say say, Say fail) {
  if (!ctx.distributed() || !ctx.watch_store) return nullptr;
  watch_this_thread();
  auto state = std::make_shared<State>();
  state->stacks_dir = std::move(stacks_dir);
  state->rank = ctx.rank;
  state->world_size = ctx.world_size;
  state->report_after_s = report_after_s;
  state->activity = ctx.activity;
  state->store = ctx.watch_store;
  state->views = ctx.views;
  state->say = std::move(say);
  state->fail = std::move(fail);
  std::thread([state] { state->run(); }).detach();
  return std::unique_ptr<HangWatch>(new HangWatch(std::move(state)));
}

HangWatch::HangWatch(std::shared_ptr<State> state) : state_(std::move(state)) {}

HangWatch::~HangWatch() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->wake.notify_all();
  state_->wake.wait_for(lock, std::chrono::seconds(2), [&] { return state_->finished; });
}

}  // namespace ddp
