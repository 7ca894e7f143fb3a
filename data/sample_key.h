// Per-sample keys and the random bytes drawn from them: any sample's draw is reached directly from its key.
#pragma once

#include <cstdint>

namespace ddp {

// SplitMix64's step and finaliser (Steele, Lea, Flood: "Fast splittable pseudorandom number generators", 2014).
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A 64-bit key of (seed, stream, index): the same on every thread, rank and run, whatever was drawn before.
inline uint64_t sample_key(uint64_t seed, int64_t stream, int64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(stream)) ^ static_cast<uint64_t>(index));
}

// n random bytes of `key`: xoshiro256++ (Blackman, Vigna, 2018) seeded with SplitMix64's first four outputs from
// `key`, each 64-bit output's bytes least significant first. The same bytes on any machine.
void fill_random_bytes(uint64_t key, uint8_t* out, int64_t n);

}  // namespace ddp
