// libFuzzer target: the persistent compile cache's entry reader (Note [Cache entries]) -- the bytes
// of a file in TORCH_TPU_CACHE_DIR, which another process, another build or a damaged disk may have
// written. Checks, beyond "no crash, no sanitizer report": a decoded entry re-encodes to exactly
// the bytes it was read from (so nothing read is silently dropped or reinterpreted), and its
// program passes the verifier (the reader ran it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/persistent_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  StatusOr<PersistentCache::Decoded> d = PersistentCache::DecodeEntry(bytes);
  if (!d.ok()) return 0;
  std::string again = PersistentCache::EncodeEntry(d->key, d->check, d->graph, d->backend_version, d->payload);
  if (again != bytes) {
    std::fprintf(stderr, "cache_entry_fuzz: a decoded entry does not re-encode to its bytes\n");
    std::abort();
  }
  return 0;
}
