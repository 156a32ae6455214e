// Fast non-cryptographic hashing for fingerprints.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tpu {

inline uint64_t HashMix(uint64_t h, uint64_t v) {
  // splitmix64-style finalizer folded into a running hash.
  v += 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ULL;
  v = (v ^ (v >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (v ^ (v >> 31));
}

inline uint64_t HashBytes(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = HashMix(h, v);
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  return HashMix(h, tail ^ (n << 56));
}

// A cheap streaming combiner for long keys (one multiply per word, as FxHash does); the running
// value is well mixed only after HashFinish.
inline uint64_t HashStep(uint64_t h, uint64_t v) { return (((h << 5) | (h >> 59)) ^ v) * 0x517cc1b727220a95ULL; }
inline uint64_t HashFinish(uint64_t h) {
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

inline uint64_t HashString(uint64_t h, std::string_view s) { return HashBytes(h, s.data(), s.size()); }

// A 128-bit fingerprint built word by word (two independent lanes), for keys that are trusted
// without a structural comparison: a fused window's program is keyed by it as its ops are
// recorded, so a cache hit costs no walk over the window.
struct Fingerprint128 {
  uint64_t lo = 0x7470755f77696e31ULL, hi = 0x6465666572726564ULL;
  void Add(uint64_t v) {
    lo = HashStep(lo, v);
    hi = HashMix(hi, v);
  }
  uint64_t Lo() const { return HashFinish(lo); }
  uint64_t Hi() const { return HashFinish(hi ^ 0x9e3779b97f4a7c15ULL); }
};

}  // namespace tpu
