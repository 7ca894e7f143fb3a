// BoundedStore: each request on a request thread, its caller waiting for it up to a deadline.
#include "launcher/bounded_store.h"

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>

namespace ddp {

struct BoundedStore::RequestThread {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> queue;
  bool stopping = false;
  bool silent = false;  // a request outlived its deadline: the thread may still be inside it
  std::thread thread;

  static std::shared_ptr<RequestThread> start() {
    auto t = std::make_shared<RequestThread>();
    t->thread = std::thread([t] {
      std::unique_lock<std::mutex> lock(t->mutex);
      for (;;) {
        t->wake.wait(lock, [&] { return t->stopping || !t->queue.empty(); });
        if (t->queue.empty()) return;
        std::function<void()> request = std::move(t->queue.front());
        t->queue.pop_front();
        lock.unlock();
        request();
        lock.lock();
      }
    });
    return t;
  }
};

namespace {

// How long a request waits beyond the deadline: a wait for a key, the store's own timeout (none: no deadline).
std::optional<std::chrono::milliseconds> waiting(std::chrono::milliseconds store_timeout) {
  if (store_timeout == c10d::Store::kNoTimeout) return std::nullopt;
  return store_timeout;
}

}  // namespace

BoundedStore::BoundedStore(c10::intrusive_ptr<c10d::Store> inner, std::chrono::milliseconds limit,
                           std::string limit_text)
    : c10d::Store(inner->getTimeout()),
      inner_(std::move(inner)),
      limit_(limit),
      limit_text_(std::move(limit_text)),
      thread_(RequestThread::start()) {}

BoundedStore::~BoundedStore() {
  std::unique_lock<std::mutex> lock(thread_->mutex);
  thread_->stopping = true;
  thread_->wake.notify_all();
  const bool silent = thread_->silent;
  lock.unlock();
  // A thread held in a request to a silent store is left to it (it holds the store and its own state); the process
  // does not wait for it.
  if (silent)
    thread_->thread.detach();
  else
    thread_->thread.join();
}

template <typename Request>
auto BoundedStore::bounded(Request request, std::optional<std::chrono::milliseconds> also) -> decltype(request()) {
  using Result = decltype(request());
  auto silent = [&] {
    std::ostringstream os;
    os << "no answer within " << std::chrono::duration<double>(limit_).count() << " s (" << limit_text_
       << "): its host is unreachable or stopped";
    return std::runtime_error(os.str());
  };
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> answer = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(thread_->mutex);
    if (thread_->silent) throw silent();
    thread_->queue.push_back([promise, request]() mutable {
      try {
        if constexpr (std::is_void_v<Result>) {
          request();
          promise->set_value();
        } else {
          promise->set_value(request());
        }
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
  }
  thread_->wake.notify_one();
  if (!also) {
    answer.wait();
  } else if (answer.wait_for(limit_ + *also) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(thread_->mutex);
    thread_->silent = true;
    throw silent();
  }
  return answer.get();
}

c10::intrusive_ptr<c10d::Store> BoundedStore::clone() {
  return c10::make_intrusive<BoundedStore>(inner_->clone(), limit_, limit_text_);
}

// Each request holds its own reference to the inner store and copies of its arguments: it may outlive this call.
void BoundedStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  bounded([inner = inner_, key, value] { inner->set(key, value); });
}

std::vector<uint8_t> BoundedStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& desired) {
  return bounded([inner = inner_, key, expected, desired] { return inner->compareSet(key, expected, desired); });
}

std::vector<uint8_t> BoundedStore::get(const std::string& key) {
  return bounded([inner = inner_, key] { return inner->get(key); }, waiting(inner_->getTimeout()));
}

int64_t BoundedStore::add(const std::string& key, int64_t value) {
  return bounded([inner = inner_, key, value] { return inner->add(key, value); });
}

bool BoundedStore::deleteKey(const std::string& key) {
  return bounded([inner = inner_, key] { return inner->deleteKey(key); });
}

bool BoundedStore::check(const std::vector<std::string>& keys) {
  return bounded([inner = inner_, keys] { return inner->check(keys); });
}

int64_t BoundedStore::getNumKeys() {
  return bounded([inner = inner_] { return inner->getNumKeys(); });
}

void BoundedStore::wait(const std::vector<std::string>& keys) {
  bounded([inner = inner_, keys] { inner->wait(keys); }, waiting(inner_->getTimeout()));
}

void BoundedStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  bounded([inner = inner_, keys, timeout] { inner->wait(keys, timeout); }, waiting(timeout));
}

const std::chrono::milliseconds& BoundedStore::getTimeout() const noexcept { return inner_->getTimeout(); }

void BoundedStore::setTimeout(const std::chrono::milliseconds& timeout) { inner_->setTimeout(timeout); }

}  // namespace ddp
