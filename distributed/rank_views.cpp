// Rank views at rendezvous: publishing, comparing, the join barrier with rank 0's verdict, and finding gone ranks.
#include "distributed/rank_views.h"

#include "base/first_line.h"
#include "distributed/proc_stat.h"
#include "base/seconds_text.h"
#include "distributed/store_notice.h"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace {

const std::string kVerdictKey = "ddptrain/verdict";
const std::string kArrivalsKey = "ddptrain/arrivals";
constexpr const char* kJoined = "joined";  // the verdict's first line when every rank joined with the same view
constexpr int64_t kKeptViews = 256;        // the views every rank keeps (to name a gone peer)
constexpr size_t kMaxViewBytes = 1024;

std::string view_key(int64_t r) { return "ddptrain/view/" + std::to_string(r); }
std::string arrival_key(int64_t n) { return "ddptrain/arrival/" + std::to_string(n); }

std::vector<uint8_t> view_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string view_string(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// "BOOT_ID pid:[INODE]": namespace inodes are unique within one boot of one kernel; "" when either is unreadable.
std::string own_pid_namespace() {
  static const std::string id = [] {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string boot_id;
    char ns[128] = {};
    if (!std::getline(boot, boot_id) || boot_id.empty() || ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1) <= 0)
      return std::string();
    return boot_id + " " + ns;
  }();
  return id;
}

std::string where(int64_t rank, const RankView& v) { return "rank " + std::to_string(rank) + " (host " + v.host + ")"; }

// "1, 2, 5 (node 1), ..." with at most 16 ranks.
std::string describe_missing(const std::vector<int64_t>& ranks, int64_t local_world_size) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) os << (i ? ", " : "") << ranks[i];
  if (ranks.size() > 16) os << ", ... (" << ranks.size() << " in all)";
  if (local_world_size > 0) {
    std::set<int64_t> nodes;
    for (int64_t r : ranks) nodes.insert(r / local_world_size);
    if (nodes.size() <= 8) {
      os << " (node" << (nodes.size() > 1 ? "s " : " ");
      bool first = true;
      for (int64_t n : nodes) os << (first ? "" : ", ") << n, first = false;
      os << ")";
    }
  }
  return os.str();
}

}  // namespace

std::string view_text(const RankView& v) {
  return "world=" + std::to_string(v.world_size) + "\nlibtorch=" + v.libtorch + "\nconfig=" + v.config +
         "\nhost=" + v.host + "\npid=" + std::to_string(v.pid) + "\npidns=" + v.pid_namespace +
         "\nstart=" + std::to_string(v.start_time);
}

std::string place_of(const RankView& v) { return "host " + v.host + ", pid " + std::to_string(v.pid); }

std::vector<std::string> places_of(const std::vector<RankView>& views) {
  std::vector<std::string> out;
  for (const auto& v : views) out.push_back(place_of(v));
  return out;
}

bool parse_view(const std::string& text, RankView& out) {
  if (text.size() > kMaxViewBytes) return false;
  std::istringstream in(text);
  std::string line;
  int seen = 0;
  try {
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) return false;
      const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
      if (k == "world") out.world_size = std::stoll(v), seen |= 1;
      else if (k == "libtorch") out.libtorch = v, seen |= 2;
      else if (k == "config") out.config = v, seen |= 4;
      else if (k == "host") out.host = v, seen |= 8;
      else if (k == "pid") out.pid = std::stoll(v), seen |= 16;
      else if (k == "pidns")
        out.pid_namespace = v, seen |= 32;
      else if (k == "start")
        out.start_time = std::stoull(v), seen |= 64;
    }
  } catch (const std::exception&) {
    return false;
  }
  return seen == 127;
}

std::string view_mismatch(int64_t rank_a, const RankView& a, int64_t rank_b, const RankView& b) {
  auto differ = [&](const std::string& what, const std::string& va, const std::string& vb, const std::string& fix) {
    return what + " differs between ranks: " + va + " on " + where(rank_a, a) + ", " + vb + " on " + where(rank_b, b) +
           " (" + fix + ")";
  };
  if (a.world_size != b.world_size)
    return differ("WORLD_SIZE", std::to_string(a.world_size), std::to_string(b.world_size),
                  "every rank must be started with the same WORLD_SIZE");
  if (a.libtorch != b.libtorch)
    return differ("LibTorch", a.libtorch, b.libtorch, "every rank must run the same ddptrain build");
  if (a.config != b.config)
    return differ("the config", "digest " + a.config, "digest " + b.config,
                  "every rank must get the same config file and --section.key overrides");
  return "";
}

RankView own_view(int64_t world_size, const std::string& config_digest) {
  RankView v;
  v.world_size = world_size;
  v.libtorch = TORCH_VERSION;
  v.config = config_digest.empty() ? "-" : config_digest;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
  v.host = host;
  v.pid = getpid();
  v.pid_namespace = own_pid_namespace();
  v.start_time = process_start_time(v.pid);
  return v;
}

bool pid_visible(const RankView& v) { return !v.pid_namespace.empty() && v.pid_namespace == own_pid_namespace(); }

bool rank_process_alive(const RankView& v) {
  return process_alive(v.pid) && (v.start_time == 0 || process_start_time(v.pid) == v.start_time);
}

namespace {

// One rank's join in O(1) store requests per rank (a job of a thousand ranks must not have each one poll for every
// other's key): each rank posts its view, counts itself in and records its arrival under the count; rank 0 alone
// reads the arrivals as the count grows, compares each view with its own, and posts one verdict: "joined" and the
// views of ranks 0..255, or what it found. The others wait for the verdict in the store (no polling), or name the
// missing ranks themselves when rank 0 never posts one.
class Joining {
 public:
  Joining(const c10::intrusive_ptr<c10d::Store>& store, const JoinPlace& place, const RankView& mine)
      : store_(store), place_(place), mine_(mine), me_("rank " + std::to_string(place.rank)) {
    for (int64_t r = 1; r < place.world_size; ++r) missing_.insert(r);
  }

  std::vector<RankView> run(std::chrono::milliseconds timeout) {
    try {
      store_->set(view_key(place_.rank), view_bytes(view_text(mine_)));
      if (place_.rank == 0) return run_as_rank0(timeout);
      const int64_t n = store_->add(kArrivalsKey, 1);
      store_->set(arrival_key(n), view_bytes(std::to_string(place_.rank) + "\n" + view_text(mine_)));
      return run_as_other(timeout);
    } catch (const c10::Error& e) {
      throw std::runtime_error(me_ + ": lost the store at " + place_.address + " while " +
                               (place_.rank == 0
                                    ? "waiting for rank(s) " + describe_missing(missing(), per_node()) + " to join"
                                    : "waiting for rank 0's verdict on the join") +
                               " (rank 0 exited?): " + first_line(e.what()));
    }
  }

 private:
  int64_t per_node() const { return place_.local_world_size < place_.world_size ? place_.local_world_size : 0; }
  std::vector<int64_t> missing() const { return {missing_.begin(), missing_.end()}; }

  [[noreturn]] void fail(const std::string& why) {
    // Rank 0's verdict: the others report the same culprit instead of "Broken pipe" once rank 0 is gone. Where its
    // exit takes the store along, the ranks counted in read it first.
    if (place_.rank == 0)
      post_notice(store_, kVerdictKey, "rank 0 found: " + why, 1 + counted_, place_.serves_store,
                  kReadersWaitInTheStore);
    throw std::runtime_error(me_ + ": " + why);
  }

  [[noreturn]] void timed_out(std::chrono::milliseconds timeout) {
    fail("timed out after " + seconds_text(timeout) + " s waiting for rank(s) " +
         describe_missing(missing(), per_node()) + " of " + std::to_string(place_.world_size) +
         " to join the store at " + place_.address + " (dist.timeout_s)");
  }

  // Rank 0: reads the arrivals as their count grows (a poll: the count, and a check of each arrival not read yet),
  // compares each view with its own.
  std::vector<RankView> run_as_rank0(std::chrono::milliseconds timeout) {
    std::map<int64_t, RankView> views{{0, mine_}};
    const auto give_up_at = std::chrono::steady_clock::now() + timeout;
    std::set<int64_t> unread;  // arrivals counted, not read yet
    while (!missing_.empty()) {
      for (const int64_t arrived = store_->add(kArrivalsKey, 0); counted_ < arrived;) unread.insert(++counted_);
      // An arrival is counted before it is recorded: one not recorded yet (its rank may have died in between) is
      // looked for again at the next poll, and holds up none of the others.
      for (auto it = unread.begin(); it != unread.end();) {
        if (!store_->check({arrival_key(*it)})) {
          ++it;
          continue;
        }
        const std::string text = view_string(store_->get(arrival_key(*it)));
        it = unread.erase(it);
        const auto nl = text.find('\n');
        int64_t r = -1;
        RankView theirs;
        try {
          r = std::stoll(text.substr(0, nl));
        } catch (const std::exception&) {
        }
        if (nl == std::string::npos || r < 0 || !parse_view(text.substr(nl + 1), theirs))
          fail("a rank published a malformed view");
        // A rank beyond this world (started with a larger WORLD_SIZE) differs in its view.
        if (const std::string why = view_mismatch(0, mine_, r, theirs); !why.empty()) fail(why);
        if (const auto seen = views.find(r); seen != views.end())
          fail("two processes joined as rank " + std::to_string(r) + ": " + place_of(seen->second) + " and " +
               place_of(theirs) + " (every process of the job needs its own RANK)");
        views[r] = theirs;
        missing_.erase(r);
      }
      if (missing_.empty()) break;
      if (std::chrono::steady_clock::now() >= give_up_at) timed_out(timeout);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<RankView> out;
    std::string verdict = kJoined;
    for (int64_t r = 0; r < place_.world_size && r < kKeptViews; ++r) {
      out.push_back(views.at(r));
      verdict += "\n\n" + view_text(out.back());
    }
    store_->set(kVerdictKey, view_bytes(verdict));
    return out;
  }

  // The others: wait in the store for rank 0's verdict; without one by the timeout (rank 0 is given two seconds
  // more to post its own), name the missing ranks.
  std::vector<RankView> run_as_other(std::chrono::milliseconds timeout) {
    try {
      store_->wait({kVerdictKey}, timeout + std::chrono::seconds(2));
    } catch (const c10::Error&) {
      // The wait timed out, or the store is gone: a check tells them apart (it throws when the store is gone).
      if (!store_->check({kVerdictKey})) {
        missing_.clear();
        for (int64_t r = 0; r < place_.world_size; ++r)
          if (r != place_.rank && !store_->check({view_key(r)})) missing_.insert(r);
        timed_out(timeout);
      }
    }
    const std::string verdict = view_string(store_->get(kVerdictKey));
    if (verdict.rfind(kJoined, 0) != 0) {
      count_notice_read(*store_, kVerdictKey);  // a failure: rank 0 may wait for its readers
      throw std::runtime_error(me_ + ": " + first_line(verdict).substr(0, 2048));
    }
    std::vector<RankView> out;
    size_t at = std::string(kJoined).size();
    while (at < verdict.size()) {
      if (verdict.compare(at, 2, "\n\n") != 0) fail("rank 0's verdict is malformed");
      const size_t next = std::min(verdict.find("\n\n", at + 2), verdict.size());
      RankView v;
      if (!parse_view(verdict.substr(at + 2, next - at - 2), v)) fail("rank 0's verdict is malformed");
      out.push_back(v);
      at = next;
    }
    if (static_cast<int64_t>(out.size()) != std::min(place_.world_size, kKeptViews))
      fail("rank 0's verdict holds " + std::to_string(out.size()) + " views");
    return out;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  const JoinPlace& place_;
  const RankView& mine_;
  const std::string me_;
  std::set<int64_t> missing_;  // rank 0: the ranks not arrived; the others: found missing at their timeout
  int64_t counted_ = 0;        // rank 0: the ranks counted in (the others that wait for its verdict)
};

}  // namespace

std::vector<RankView> join_ranks(const c10::intrusive_ptr<c10d::Store>& store, const JoinPlace& place,
                                 const RankView& mine, std::chrono::milliseconds timeout) {
  return Joining(store, place, mine).run(timeout);
}

std::string gone_ranks(const std::vector<RankView>& views, int64_t self, std::chrono::milliseconds settle) {
  const auto until = std::chrono::steady_clock::now() + settle;
  for (;;) {
    std::string gone;
    for (size_t r = 0; r < views.size(); ++r) {
      const RankView& v = views[r];
      if (static_cast<int64_t>(r) == self || !pid_visible(v) || rank_process_alive(v)) continue;
      gone += (gone.empty() ? "rank " : ", rank ") + std::to_string(r) + " (host " + v.host + ", pid " +
              std::to_string(v.pid) + ")";
    }
    if (!gone.empty()) return gone + " exited";
    if (std::chrono::steady_clock::now() >= until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ddp
