// Random bytes of a per-sample key: xoshiro256++ seeded through SplitMix64.
#include "data/sample_key.h"

namespace ddp {
namespace {

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

struct Xoshiro256pp {
  uint64_t s[4];
  uint64_t next() {
    const uint64_t result = rotl(s[0] + s[3], 23) + s[0];
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

}  // namespace

void fill_random_bytes(uint64_t key, uint8_t* out, int64_t n) {
  Xoshiro256pp gen;
  for (uint64_t& word : gen.s) {  // SplitMix64 from state `key`: distinct outputs, never all zero
    word = splitmix64(key);
    key += 0x9e3779b97f4a7c15ULL;
  }
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const uint64_t w = gen.next();
    for (int b = 0; b < 8; ++b) out[k + b] = static_cast<uint8_t>(w >> (8 * b));
  }
  const uint64_t w = gen.next();
  for (int b = 0; k + b < n; ++b) out[k + b] = static_cast<uint8_t>(w >> (8 * b));
}

}  // namespace ddp
