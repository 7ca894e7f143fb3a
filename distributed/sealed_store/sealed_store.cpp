// SealedStore: key names as HMAC-SHA256 of the job's secret, values sealed with AES-256-GCM (OpenSSL's libcrypto).
#include "distributed/sealed_store/sealed_store.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>
#include <stdexcept>

namespace ddp {
namespace {

constexpr char kSealMagic[4] = {'D', 'S', 'S', '1'};
constexpr size_t kNonceBytes = 12, kTagBytes = 16;

std::vector<uint8_t> sealed_hmac(const std::vector<uint8_t>& key, const std::string& data) {
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const uint8_t*>(data.data()),
            data.size(), out.data(), &len))
    throw std::runtime_error("HMAC-SHA256 failed");
  out.resize(len);
  return out;
}

std::string sealed_hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, void (*)(EVP_CIPHER_CTX*)>;
CipherCtx sealed_ctx() {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  if (!ctx) throw std::runtime_error("EVP_CIPHER_CTX_new failed");
  return ctx;
}

}  // namespace

std::string make_job_secret() {
  uint8_t bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("cannot make a job secret: RAND_bytes failed");
  return sealed_hex(bytes, sizeof bytes);
}

std::string job_secret_problem(const std::string& secret) {
  if (secret.size() >= 16 && secret.size() <= 1024) return "";
  return "has " + std::to_string(secret.size()) + " characters; give 16 to 1024 (openssl rand -hex 32)";
}

SealedStore::SealedStore(const std::string& secret, c10::intrusive_ptr<c10d::Store> inner, std::string where,
                         size_t max_value_bytes)
    : inner_(std::move(inner)), where_(std::move(where)), max_value_bytes_(max_value_bytes) {
  if (const std::string problem = job_secret_problem(secret); !problem.empty())
    throw std::runtime_error("DDPTRAIN_JOB_SECRET " + problem);
  const std::vector<uint8_t> s(secret.begin(), secret.end());
  name_key_ = sealed_hmac(s, "ddptrain store key names");
  value_key_ = sealed_hmac(s, "ddptrain store values");
}

SealedStore::SealedStore(const SealedStore& other, c10::intrusive_ptr<c10d::Store> inner)
    : inner_(std::move(inner)),
      where_(other.where_),
      max_value_bytes_(other.max_value_bytes_),
      name_key_(other.name_key_),
      value_key_(other.value_key_) {}

c10::intrusive_ptr<c10d::Store> SealedStore::clone() {
  return c10::make_intrusive<SealedStore>(*this, inner_->clone());
}

std::string SealedStore::sealed_name(const std::string& key) const {
  const auto mac = sealed_hmac(name_key_, key);
  return "s/" + sealed_hex(mac.data(), 20);
}

std::vector<std::string> SealedStore::sealed_names(const std::vector<std::string>& keys) const {
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(sealed_name(k));
  return names;
}

std::vector<uint8_t> SealedStore::seal(const std::string& key, const std::vector<uint8_t>& plain) const {
  std::vector<uint8_t> out(sizeof kSealMagic + kNonceBytes + plain.size() + kTagBytes);
  std::memcpy(out.data(), kSealMagic, sizeof kSealMagic);
  uint8_t* nonce = out.data() + sizeof kSealMagic;
  if (RAND_bytes(nonce, kNonceBytes) != 1) throw std::runtime_error("RAND_bytes failed");
  auto ctx = sealed_ctx();
  int len = 0;
  uint8_t* body = nonce + kNonceBytes;
  bool ok = EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, value_key_.data(), nonce) == 1 &&
            EVP_EncryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const uint8_t*>(key.data()),
                              static_cast<int>(key.size())) == 1 &&
            EVP_EncryptUpdate(ctx.get(), body, &len, plain.data(), static_cast<int>(plain.size())) == 1 &&
            EVP_EncryptFinal_ex(ctx.get(), body + len, &len) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, body + plain.size()) == 1;
  if (!ok) throw std::runtime_error("AES-256-GCM sealing failed");
  return out;
}

std::vector<uint8_t> SealedStore::unseal(const std::string& key, const std::vector<uint8_t>& sealed) const {
  const size_t overhead = sizeof kSealMagic + kNonceBytes + kTagBytes;
  auto refuse = [&](const std::string& why) {
    return std::runtime_error("the store at " + where_ + " holds a value for \"" + key + "\" that " + why +
                              " (another job or an outsider wrote it, or the ranks have different "
                              "DDPTRAIN_JOB_SECRET values)");
  };
  if (sealed.size() > max_value_bytes_ + overhead)
    throw refuse("is " + std::to_string(sealed.size()) + " bytes (at most " + std::to_string(max_value_bytes_) +
                 " are read)");
  if (sealed.size() < overhead || std::memcmp(sealed.data(), kSealMagic, sizeof kSealMagic) != 0)
    throw refuse("this job did not seal");
  const uint8_t* nonce = sealed.data() + sizeof kSealMagic;
  const uint8_t* body = nonce + kNonceBytes;
  const size_t n = sealed.size() - overhead;
  std::vector<uint8_t> plain(n + 1);  // +1: EVP may not take a null output for an empty body
  auto ctx = sealed_ctx();
  int len = 0;
  std::vector<uint8_t> tag(body + n, body + n + kTagBytes);
  bool ok = EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, value_key_.data(), nonce) == 1 &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const uint8_t*>(key.data()),
                              static_cast<int>(key.size())) == 1 &&
            EVP_DecryptUpdate(ctx.get(), plain.data(), &len, body, static_cast<int>(n)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
            EVP_DecryptFinal_ex(ctx.get(), plain.data() + len, &len) == 1;
  if (!ok) throw refuse("fails authentication");
  plain.resize(n);
  return plain;
}

void SealedStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  inner_->set(sealed_name(key), seal(key, value));
}

std::vector<uint8_t> SealedStore::get(const std::string& key) { return unseal(key, inner_->get(sealed_name(key))); }

// Compare-and-set on plaintext: the current sealed value is read, compared opened, and swapped only if unchanged.
std::vector<uint8_t> SealedStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  const std::string name = sealed_name(key);
  for (;;) {
    std::vector<uint8_t> current_sealed, current;
    const bool present = inner_->check({name});
    if (present) {
      current_sealed = inner_->get(name);
      current = unseal(key, current_sealed);
    }
    if (!present && !expected.empty()) return expected;  // as TCPStore: a missing key with a non-empty expectation
    if (present && current != expected) return current;
    const auto next = seal(key, desired);
    if (inner_->compareSet(name, current_sealed, next) == next) return desired;
  }
}

int64_t SealedStore::add(const std::string& key, int64_t value) {
  const std::string name = sealed_name(key);
  for (;;) {
    std::vector<uint8_t> current_sealed;
    int64_t current = 0;
    if (inner_->check({name})) {
      current_sealed = inner_->get(name);
      const auto text = unseal(key, current_sealed);
      current = std::stoll(std::string(text.begin(), text.end()));
    }
    const std::string sum = std::to_string(current + value);
    const auto next = seal(key, std::vector<uint8_t>(sum.begin(), sum.end()));
    if (inner_->compareSet(name, current_sealed, next) == next) return current + value;
  }
}

bool SealedStore::deleteKey(const std::string& key) { return inner_->deleteKey(sealed_name(key)); }
bool SealedStore::check(const std::vector<std::string>& keys) { return inner_->check(sealed_names(keys)); }
int64_t SealedStore::getNumKeys() { return inner_->getNumKeys(); }
void SealedStore::wait(const std::vector<std::string>& keys) { inner_->wait(sealed_names(keys)); }
void SealedStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  inner_->wait(sealed_names(keys), timeout);
}
const std::chrono::milliseconds& SealedStore::getTimeout() const noexcept { return inner_->getTimeout(); }
void SealedStore::setTimeout(const std::chrono::milliseconds& timeout) { inner_->setTimeout(timeout); }

}  // namespace ddp
