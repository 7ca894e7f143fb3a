// SealedStore: a c10d::Store decorator that hides a job's keys and values from whoever else reaches the store's port.
//
// c10d's TCPStore has no authentication: anyone who connects can list every key (listKeys), read and write them.
// With the job's secret (DDPTRAIN_JOB_SECRET, made by ddprun) every key name becomes HMAC-SHA256(secret, name) and
// every value is sealed with AES-256-GCM (a random nonce, the key name as associated data): an outsider sees opaque
// names and ciphertext, and a value it writes, replays under another name, or truncates fails to open. Values are
// read only up to max_value_bytes; a larger one is refused before it is decrypted.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

namespace ddp {

class SealedStore : public c10d::Store {
 public:
  // `secret`: at least 16 bytes of high-entropy text. `where` names the store in errors ("the store at HOST:PORT").
  SealedStore(const std::string& secret, c10::intrusive_ptr<c10d::Store> inner, std::string where,
              size_t max_value_bytes = size_t{1} << 20);
  // The same keys over another client of the same store (clone()).
  SealedStore(const SealedStore& other, c10::intrusive_ptr<c10d::Store> inner);

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

  // The name `key` has in the inner store (tests look for it).
  std::string sealed_name(const std::string& key) const;

 private:
  std::vector<std::string> sealed_names(const std::vector<std::string>& keys) const;
  std::vector<uint8_t> seal(const std::string& key, const std::vector<uint8_t>& plain) const;
  std::vector<uint8_t> unseal(const std::string& key, const std::vector<uint8_t>& sealed) const;

  c10::intrusive_ptr<c10d::Store> inner_;
  std::string where_;
  size_t max_value_bytes_;
  std::vector<uint8_t> name_key_, value_key_;  // derived from the secret: HMAC(secret, purpose)
};

// A fresh secret (32 random bytes, hex) for DDPTRAIN_JOB_SECRET.
std::string make_job_secret();

// "" when `secret` can be DDPTRAIN_JOB_SECRET (16 to 1024 characters), else what is wrong with it
// ("has 8 characters; give 16 to 1024 (openssl rand -hex 32)").
std::string job_secret_problem(const std::string& secret);

}  // namespace ddp
