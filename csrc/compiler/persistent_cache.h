// The compile cache's persistent tier: a directory (option cache_dir, TORCH_TPU_CACHE_DIR) that
// processes and hosts share. Each entry is one file holding a program and its backend's
// executable (Backend::Serialize), written atomically (a temporary file, then a rename) so that
// concurrent writers never leave a torn entry. Note [Cache entries]: an entry carries a format
// version, the compiler's and the backend's versions, its key, the program it was compiled from
// and a checksum of all of it; one that is truncated, corrupt, of another version or for another
// program is ignored (counted, reported once) and recompiled -- never trusted. The directory is
// bounded (option cache_dir_max_mb): the least recently used entries go first.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/status.h"
#include "ir/graph.h"
#include "runtime/device.h"

namespace tpu {

struct DiskStats {
  std::string dir;  // empty: the tier is off
  int64_t entries = 0;
  int64_t bytes = 0;
};

class PersistentCache {
 public:
  static PersistentCache& Get();
  // Whether a directory is configured (read per call: tests and users may change the option).
  bool enabled() const;
  // The executable of an entry for (key, check) compiled from `graph`; null when there is none
  // or it is not valid (then `why` says why, unless there simply was none).
  ExecutablePtr Load(uint64_t key, uint64_t check, const Graph& graph, const Backend& backend,
                     const CompileOptions& options, std::string* why);
  // Writes the entry; a failure (a full disk, no permission) is reported once, not raised.
  void Store(uint64_t key, uint64_t check, const Graph& graph, const Executable& exe, const Backend& backend);
  DiskStats stats();
  // Removes every entry of the directory (this build's and others').
  void Clear();

  // The entry format (Note [Cache entries]), for tests and the fuzz target.
  static std::string EncodeEntry(uint64_t key, uint64_t check, const Graph& graph, const std::string& backend_version,
                                 const std::string& payload);
  struct Decoded {
    uint64_t key = 0, check = 0;
    std::string backend_version;
    Graph graph;
    std::string payload;
  };
  static StatusOr<Decoded> DecodeEntry(const std::string& bytes);

 private:
  std::string EntryPath(const std::string& dir, uint64_t key, uint64_t check, const Backend& backend) const;
  void EvictLocked(const std::string& dir);
  std::mutex mu_;
  std::string scanned_dir_;  // the directory total_bytes_ describes
  int64_t total_bytes_ = 0;
};

}  // namespace tpu
