// Process group connection under a watchdog: errors posted to the store end all ranks; a deadline bounds the wait.
#include "distributed/group_connect.h"

#include "base/first_line.h"
#include "base/seconds_text.h"
#include "base/thread_name.h"
#include "distributed/store_notice.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace {

const std::string kFailedKey = "ddptrain/connect_failed";

// Ends the process from the watchdog thread: the main thread is blocked inside the group's constructor.
[[noreturn]] void give_up(int64_t rank, const std::string& message) {
  std::cerr << "[rank " << rank << "] error: " << message << std::endl;
  std::fflush(nullptr);
  std::_Exit(1);
}

// How often each rank's watchdog looks at the store: at most 500 checks a second reach it whatever the world.
std::chrono::milliseconds connect_poll_interval(int64_t world_size) {
  return std::chrono::milliseconds(std::max<int64_t>(100, 2 * world_size));
}

class Watchdog {
 public:
  Watchdog(const ConnectWatch& watch, std::chrono::milliseconds timeout)
      : watch_(watch), timeout_(timeout), thread_([this] { run(); }) {}
  ~Watchdog() { stop(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    name_this_thread("ddp-watchdog");
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    const auto poll = connect_poll_interval(watch_.world_size);
    auto next_gone_check = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, poll, [this] { return stopped_; })) {
      if (watch_.store) {
        try {
          if (watch_.store->check({kFailedKey}))
            give_up(watch_.rank, "the process group failed to connect on another rank: " +
                                     first_line(read_notice(*watch_.store, kFailedKey)).substr(0, 2048));
        } catch (const std::exception&) {
          const std::string gone = watch_.gone_peers ? watch_.gone_peers(std::chrono::seconds(1)) : "";
          give_up(watch_.rank, "lost the store at " + watch_.store_address +
                                   " while the process group was connecting (" +
                                   (gone.empty() ? "rank 0, its host, exited?" : gone) + ")");
        }
      }
      // A peer of this host that died while connecting: Gloo would wait for it until the deadline.
      if (watch_.gone_peers && std::chrono::steady_clock::now() >= next_gone_check) {
        if (const std::string gone = watch_.gone_peers(std::chrono::milliseconds(0)); !gone.empty())
          give_up(watch_.rank, "the process group could not connect: " + gone);
        next_gone_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        const std::string gone = watch_.gone_peers ? watch_.gone_peers(std::chrono::seconds(1)) : "";
        give_up(watch_.rank,
                "the process group did not connect within dist.timeout_s = " + seconds_text(timeout_) + " s (" +
                    (gone.empty() ? "a peer is unreachable or stuck; with several nodes, GLOO_SOCKET_IFNAME "
                                    "names the interface whose address each rank publishes to the others"
                                  : gone) +
                    ")");
      }
    }
  }

  const ConnectWatch& watch_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace

std::string gloo_connect_hint(const std::string& message) {
  const bool connect_error =
      message.find("Connection refused") != std::string::npos || message.find("Connect timeout") != std::string::npos ||
      message.find("No route to host") != std::string::npos ||
      (message.find("connect [") != std::string::npos && message.find("timed out") != std::string::npos);
  if (!connect_error) return "";
  const std::string fix = "set GLOO_SOCKET_IFNAME to the interface that reaches the other ranks";
  if (message.find("[127.") != std::string::npos || message.find("[::1]") != std::string::npos)
    return "a peer published a loopback address (its hostname resolves to loopback, or GLOO_SOCKET_IFNAME=lo); " + fix;
  return "each rank publishes the address of GLOO_SOCKET_IFNAME's interface, else of its hostname; " + fix;
}

c10::intrusive_ptr<c10d::Backend> connect_backend(const std::function<c10::intrusive_ptr<c10d::Backend>()>& connect,
                                                  const ConnectWatch& watch, std::chrono::milliseconds timeout) {
  Watchdog watchdog(watch, timeout);
  try {
    auto backend = connect();
    watchdog.stop();
    return backend;
  } catch (const std::exception& e) {
    watchdog.stop();
    const std::string gone = watch.gone_peers ? watch.gone_peers(std::chrono::seconds(1)) : "";
    const std::string what = gone.empty() ? first_line(e.what()) : gone + " (" + first_line(e.what()) + ")";
    // Where this rank's exit takes the store along, the others are given two of their polls and a second to read it.
    post_notice(watch.store, kFailedKey, "rank " + std::to_string(watch.rank) + ": " + what, watch.world_size,
                watch.serves_store, connect_poll_interval(watch.world_size));
    const std::string hint = gloo_connect_hint(what);
    throw std::runtime_error("rank " + std::to_string(watch.rank) + ": could not connect the process group: " + what +
                             (hint.empty() ? "" : " (" + hint + ")"));
  }
}

}  // namespace ddp
