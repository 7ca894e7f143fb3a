// A notice through the store: posted once (compareSet), read and counted by the others, its poster waiting for them.
#include "distributed/store_notice.h"

#include "base/thread_name.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace ddp {
namespace {

std::string count_key(const std::string& key) { return key + "/count"; }

}  // namespace

void post_notice(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key, const std::string& text,
                 int64_t world, bool wait_for_readers, std::chrono::milliseconds reader_poll) {
  if (!store) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1) +
                        (wait_for_readers ? 2 * reader_poll : std::chrono::milliseconds(0));
  struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  std::thread([store, key, text, world, wait_for_readers, deadline, done] {
    name_this_thread("ddp-notice");
    try {
      store->compareSet(key, {}, std::vector<uint8_t>(text.begin(), text.end()));
      for (int64_t counted = store->add(count_key(key), 1); wait_for_readers && counted < world;
           counted = store->add(count_key(key), 0)) {
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } catch (const std::exception&) {
      // The store is gone: the others learn of this rank's end by other means.
    }
    std::lock_guard<std::mutex> lock(done->mutex);
    done->done = true;
    done->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(done->mutex);
  done->cv.wait_until(lock, deadline, [&] { return done->done; });
}

std::string read_notice(c10d::Store& store, const std::string& key) {
  const auto bytes = store.get(key);
  count_notice_read(store, key);
  return std::string(bytes.begin(), bytes.end());
}

void count_notice_read(c10d::Store& store, const std::string& key) {
  try {
    store.add(count_key(key), 1);
  } catch (const std::exception&) {
    // The poster took the store with it after all: the notice is read already.
  }
}

}  // namespace ddp
