// Rank views at rendezvous: publishing, comparing, the join barrier with rank 0's verdict, and finding gone ranks.
#include "distributed/rank_views.h"

#include "base/first_line.h"
#include "distributed/proc_stat.h"
#include "base/seconds_text.h"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace {

const std::string kVerdictKey = "ddptrain/verdict";
constexpr size_t kMaxViewBytes = 1024;

std::string view_key(int64_t r) { return "ddptrain/view/" + std::to_string(r); }

std::vector<uint8_t> view_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string view_string(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

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
         "\nhost=" + v.host + "\npid=" + std::to_string(v.pid);
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
    }
  } catch (const std::exception&) {
    return false;
  }
  return seen == 31;
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
  return v;
}

namespace {

// One rank's join: publish its view, compare views, wait for every rank, or fail naming the culprit.
class Joining {
 public:
  Joining(c10d::Store& store, const JoinPlace& place, const RankView& mine)
      : store_(store), place_(place), mine_(mine), me_("rank " + std::to_string(place.rank)) {
    for (int64_t r = 0; r < place.world_size; ++r) missing_.push_back(r);
  }

  std::vector<RankView> run(std::chrono::milliseconds timeout) {
    const int64_t per_node = place_.local_world_size < place_.world_size ? place_.local_world_size : 0;
    try {
      store_.set(view_key(place_.rank), view_bytes(view_text(mine_)));
      // The others give rank 0 two more seconds to post its verdict before reporting their own.
      const auto give_up_at = std::chrono::steady_clock::now() + timeout +
                              (place_.rank == 0 ? std::chrono::seconds(0) : std::chrono::seconds(2));
      while (true) {
        if (place_.rank == 0) poll_as_rank0();
        else poll_as_other();
        if (missing_.empty() && compared_with_rank0_) return views();
        if (std::chrono::steady_clock::now() >= give_up_at) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      missing_ = still_missing();
    } catch (const c10::Error& e) {
      missing_.erase(std::remove(missing_.begin(), missing_.end(), place_.rank), missing_.end());
      throw std::runtime_error(me_ + ": lost the store at " + place_.address + " while waiting for rank(s) " +
                               describe_missing(missing_, per_node) + " to join (rank 0 exited?): " +
                               first_line(e.what()));
    }
    fail("timed out after " + seconds_text(timeout) + " s waiting for rank(s) " +
         describe_missing(missing_, per_node) + " of " + std::to_string(place_.world_size) +
         " to join the store at " + place_.address + " (dist.timeout_s)");
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    // Rank 0's verdict: the others report the same culprit instead of "Broken pipe" once rank 0 is gone.
    if (place_.rank == 0) {
      try {
        store_.set(kVerdictKey, view_bytes("rank 0 found: " + why));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others poll every 20 ms
      } catch (const std::exception&) {
      }
    }
    throw std::runtime_error(me_ + ": " + why);
  }

  void compare(int64_t r) {
    RankView theirs;
    const std::string text = view_string(store_.get(view_key(r)));
    if (!parse_view(text, theirs)) fail("rank " + std::to_string(r) + " published a malformed view");
    const bool zero = place_.rank == 0;
    const std::string why =
        view_mismatch(0, zero ? mine_ : theirs, zero ? r : place_.rank, zero ? theirs : mine_);
    if (!why.empty()) fail(why);
  }

  // Rank 0 compares each rank's view as it arrives.
  void poll_as_rank0() {
    std::vector<int64_t> still;
    for (int64_t r : missing_) {
      if (r == 0) continue;
      if (store_.check({view_key(r)})) compare(r);
      else still.push_back(r);
    }
    missing_.swap(still);
    // A rank beyond this world (started with a larger WORLD_SIZE) is a mismatch too.
    if (store_.check({view_key(place_.world_size)})) compare(place_.world_size);
  }

  // The others compare with rank 0's view, then wait for all at once (one check of every key).
  void poll_as_other() {
    if (store_.check({kVerdictKey}))
      throw std::runtime_error(me_ + ": " + first_line(view_string(store_.get(kVerdictKey))).substr(0, 2048));
    if (!compared_with_rank0_ && store_.check({view_key(0)})) {
      compare(0);
      compared_with_rank0_ = true;
    }
    std::vector<std::string> keys;
    for (int64_t r : missing_) keys.push_back(view_key(r));
    if (compared_with_rank0_ && store_.check(keys)) missing_.clear();
  }

  std::vector<int64_t> still_missing() {
    std::vector<int64_t> still;
    for (int64_t r : missing_)
      if (r != place_.rank && !store_.check({view_key(r)})) still.push_back(r);
    return still;
  }

  std::vector<RankView> views() {
    std::vector<RankView> out;
    for (int64_t r = 0; r < place_.world_size && r < 256; ++r) {
      RankView v = mine_;
      if (r != place_.rank && !parse_view(view_string(store_.get(view_key(r))), v))
        fail("rank " + std::to_string(r) + " published a malformed view");
      out.push_back(v);
    }
    return out;
  }

  c10d::Store& store_;
  const JoinPlace& place_;
  const RankView& mine_;
  const std::string me_;
  std::vector<int64_t> missing_;
  bool compared_with_rank0_ = place_.rank == 0;
};

}  // namespace

std::vector<RankView> join_ranks(c10d::Store& store, const JoinPlace& place, const RankView& mine,
                                 std::chrono::milliseconds timeout) {
  return Joining(store, place, mine).run(timeout);
}

std::string gone_ranks(const std::vector<RankView>& views, int64_t self, std::chrono::milliseconds settle) {
  const std::string host = own_view(0, "").host;
  const auto until = std::chrono::steady_clock::now() + settle;
  for (;;) {
    std::string gone;
    for (size_t r = 0; r < views.size(); ++r) {
      const RankView& v = views[r];
      if (static_cast<int64_t>(r) == self || v.host != host || process_alive(v.pid)) continue;
      gone += (gone.empty() ? "rank " : ", rank ") + std::to_string(r) + " (host " + v.host + ", pid " +
              std::to_string(v.pid) + ")";
    }
    if (!gone.empty()) return gone + " exited";
    if (std::chrono::steady_clock::now() >= until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ddp
