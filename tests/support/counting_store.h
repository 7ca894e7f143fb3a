// CountingStore: a c10d::Store that forwards to another, counts one client's requests, can lose it or read late.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace ddp::test {

// What the clients sharing one Outage see of the store behind them: a server that answers, one whose process
// exited (every request throws, as a TCPStore client's does on a closed connection), or one behind a link gone
// silent (every request waits until the outage ends).
class Outage {
 public:
  enum class State { kUp, kGone, kSilent };
  void set(State s) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      state_ = s;
    }
    changed_.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return state_ != State::kSilent; });
    if (state_ == State::kGone) throw std::runtime_error("Connection reset by peer");
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  State state_ = State::kUp;
};

// One rank's client of a shared store; a wait counts as one request. Without the extended API (multiGet, multiSet,
// append), as a store client that makes one request per key.
class CountingStore : public c10d::Store {
 public:
  explicit CountingStore(c10::intrusive_ptr<c10d::Store> inner, std::shared_ptr<Outage> outage = {})
      : inner_(std::move(inner)), outage_(std::move(outage)) {}
  int64_t requests() const { return requests_.load(); }
  // This client reads `key` only after `delay`, as a rank that is slow to look.
  void delay_reads_of(const std::string& key, std::chrono::milliseconds delay) { delayed_key_ = key, delay_ = delay; }

  c10::intrusive_ptr<c10d::Store> clone() override { return c10::make_intrusive<CountingStore>(inner_, outage_); }
  void set(const std::string& key, const std::vector<uint8_t>& value) override { pass(), inner_->set(key, value); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    pass();
    return inner_->compareSet(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    if (key == delayed_key_) std::this_thread::sleep_for(delay_);
    return pass(), inner_->get(key);
  }
  int64_t add(const std::string& key, int64_t value) override { return pass(), inner_->add(key, value); }
  bool deleteKey(const std::string& key) override { return pass(), inner_->deleteKey(key); }
  bool check(const std::vector<std::string>& keys) override { return pass(), inner_->check(keys); }
  int64_t getNumKeys() override { return pass(), inner_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { pass(), inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    pass(), inner_->wait(keys, timeout);
  }

 private:
  void pass() {
    ++requests_;
    if (outage_) outage_->pass();
  }

  c10::intrusive_ptr<c10d::Store> inner_;
  std::shared_ptr<Outage> outage_;
  std::atomic<int64_t> requests_{0};
  std::string delayed_key_;
  std::chrono::milliseconds delay_{0};
};

}  // namespace ddp::test
