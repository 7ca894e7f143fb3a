// BoundedStore: a c10d::Store decorator that gives every request to ddprun's store between nodes a deadline.
//
// c10d's TCPStore reads the answer to check, set, add and get with a blocking recv and no timeout of its own (only its
// waits have one). When the store's host goes silent (a link down, a machine powered off: no reset reaches this one)
// such a request waits until TCP gives up retransmitting, some 15 minutes (net.ipv4.tcp_retries2), and the ddprun that
// made it with it: its workers, already failed on dist.timeout_s, are never reaped and its node never ends. Here each
// request runs on a request thread of its own and the caller waits at most `limit` for it (a wait for a key: the
// store's timeout plus `limit`), then throws; every later request throws at once (the request thread is still held).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ddp {

class BoundedStore : public c10d::Store {
 public:
  // `limit`: how long one request may take (ddprun's --rdzv-conf read_timeout); `limit_text` names it in errors.
  BoundedStore(c10::intrusive_ptr<c10d::Store> inner, std::chrono::milliseconds limit, std::string limit_text);
  ~BoundedStore() override;
  BoundedStore(const BoundedStore&) = delete;
  BoundedStore& operator=(const BoundedStore&) = delete;

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  const std::chrono::milliseconds& getTimeout() const noexcept override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;
  bool hasExtendedApi() const override { return false; }  // append/multiGet/multiSet: the base's get/set loops

  struct RequestThread;

 private:
  // Runs `request` on the request thread; waits for it up to limit_ + `also` (none: as long as it takes), then
  // throws, and so does every later call.
  template <typename Request>
  auto bounded(Request request, std::optional<std::chrono::milliseconds> also = std::chrono::milliseconds(0))
      -> decltype(request());

  c10::intrusive_ptr<c10d::Store> inner_;
  std::chrono::milliseconds limit_;
  std::string limit_text_;
  std::shared_ptr<RequestThread> thread_;  // shared with the thread itself, which may outlive this store
};

}  // namespace ddp
