// CountingStore: a c10d::Store that forwards to another and counts the requests one client makes.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>

namespace ddp::test {

// One rank's client of a shared store; a wait counts as one request. Without the extended API (multiGet, multiSet,
// append), as a store client that makes one request per key.
class CountingStore : public c10d::Store {
 public:
  explicit CountingStore(c10::intrusive_ptr<c10d::Store> inner) : inner_(std::move(inner)) {}
  int64_t requests() const { return requests_.load(); }

  c10::intrusive_ptr<c10d::Store> clone() override { return c10::make_intrusive<CountingStore>(inner_); }
  void set(const std::string& key, const std::vector<uint8_t>& value) override { ++requests_, inner_->set(key, value); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    ++requests_;
    return inner_->compareSet(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override { return ++requests_, inner_->get(key); }
  int64_t add(const std::string& key, int64_t value) override { return ++requests_, inner_->add(key, value); }
  bool deleteKey(const std::string& key) override { return ++requests_, inner_->deleteKey(key); }
  bool check(const std::vector<std::string>& keys) override { return ++requests_, inner_->check(keys); }
  int64_t getNumKeys() override { return ++requests_, inner_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { ++requests_, inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    ++requests_, inner_->wait(keys, timeout);
  }

 private:
  c10::intrusive_ptr<c10d::Store> inner_;
  std::atomic<int64_t> requests_{0};
};

}  // namespace ddp::test
