#include "compiler/persistent_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "base/bytes.h"
#include "base/hash.h"
#include "base/metrics.h"
#include "base/options.h"
#include "compiler/compiler.h"
#include "ir/serialize.h"

namespace tpu {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', 'C', '1'};
constexpr uint32_t kEntryFormat = 1;
constexpr const char* kSuffix = ".tpuexe";

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t Checksum(const char* p, size_t n) { return HashBytes(0x63686b73756d0001ULL, p, n); }

// One warning per process and kind: a cache directory full of stale entries must not flood.
void WarnOnce(const std::string& what) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    std::fprintf(stderr, "torch_tpu: compile cache: %s (further problems are only counted: "
                         "torch_tpu.compile_cache.stats())\n", what.c_str());
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

PersistentCache& PersistentCache::Get() {
  static PersistentCache* cache = new PersistentCache();
  return *cache;
}

bool PersistentCache::enabled() const { return !PathOption("cache_dir").empty(); }

std::string PersistentCache::EncodeEntry(uint64_t key, uint64_t check, const Graph& graph,
                                         const std::string& backend_version, const std::string& payload) {
  ByteWriter w;
  for (char c : kMagic) w.U8(static_cast<uint8_t>(c));
  w.U32(kEntryFormat);
  w.U32(kCompilerVersion);
  w.Str(backend_version);
  w.U64(key);
  w.U64(check);
  ByteWriter g;
  WriteGraph(graph, g);
  w.Str(g.bytes());
  w.Str(payload);
  std::string out = w.take();
  uint64_t sum = Checksum(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  return out;
}

StatusOr<PersistentCache::Decoded> PersistentCache::DecodeEntry(const std::string& bytes) {
  if (bytes.size() < sizeof(kMagic) + 8 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return InvalidArgument("not a torch_tpu compile-cache entry");
  uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (Checksum(bytes.data(), bytes.size() - 8) != sum) return InvalidArgument("checksum mismatch (corrupt or truncated)");
  ByteReader r(std::string_view(bytes.data() + sizeof(kMagic), bytes.size() - sizeof(kMagic) - 8));
  uint32_t format, compiler;
  TPU_RETURN_IF_ERROR(r.U32(&format));
  if (format != kEntryFormat) return InvalidArgument("entry format " + std::to_string(format) + " is not this build's");
  TPU_RETURN_IF_ERROR(r.U32(&compiler));
  if (compiler != kCompilerVersion)
    return InvalidArgument("written by compiler version " + std::to_string(compiler) + ", this is " +
                           std::to_string(kCompilerVersion));
  Decoded d;
  TPU_RETURN_IF_ERROR(r.Str(&d.backend_version));
  TPU_RETURN_IF_ERROR(r.U64(&d.key));
  TPU_RETURN_IF_ERROR(r.U64(&d.check));
  std::string graph_bytes;
  TPU_RETURN_IF_ERROR(r.Str(&graph_bytes));
  ByteReader gr(graph_bytes);
  TPU_ASSIGN_OR_RETURN(d.graph, ReadGraph(gr));
  if (gr.remaining() != 0) return InvalidArgument("trailing bytes after the program");
  TPU_RETURN_IF_ERROR(r.Str(&d.payload));
  if (r.remaining() != 0) return InvalidArgument("trailing bytes");
  return d;
}

std::string PersistentCache::EntryPath(const std::string& dir, uint64_t key, uint64_t check,
                                       const Backend& backend) const {
  // One folder per backend build: entries of another plugin or version are never even opened.
  std::string version = backend.version();
  std::string folder = backend.name() + "-" + Hex(HashBytes(0x76657273ULL, version.data(), version.size()));
  return dir + "/" + folder + "/" + Hex(key) + Hex(check) + kSuffix;
}

ExecutablePtr PersistentCache::Load(uint64_t key, uint64_t check, const Graph& graph, const Backend& backend,
                                    const CompileOptions& options, std::string* why) {
  static Counter* rejected = GetCounter("compile_cache_disk_rejected");
  std::string dir = PathOption("cache_dir");
  if (dir.empty()) return nullptr;
  std::string path = EntryPath(dir, key, check, backend);
  std::string bytes;
  if (!ReadFile(path, &bytes)) return nullptr;  // no entry
  auto reject = [&](const std::string& reason) -> ExecutablePtr {
    rejected->Add();
    *why = "entry " + path + " ignored: " + reason;
    WarnOnce(*why + "; the program is compiled again and the entry replaced");
    return nullptr;
  };
  StatusOr<Decoded> d = DecodeEntry(bytes);
  if (!d.ok()) return reject(d.status().message());
  if (d->key != key || d->check != check) return reject("it is another program's (its key differs)");
  if (d->backend_version != backend.version()) return reject("it was compiled for " + d->backend_version);
  if (!StructurallyEqual(d->graph, graph)) return reject("it holds another program (a key collision)");
  StatusOr<ExecutablePtr> exe = backend.Deserialize(d->payload, graph, options);
  if (!exe.ok()) return reject(exe.status().message());
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used: evicted last
  return exe.value();
}

void PersistentCache::Store(uint64_t key, uint64_t check, const Graph& graph, const Executable& exe,
                            const Backend& backend) {
  static Counter* writes = GetCounter("compile_cache_disk_writes");
  static std::atomic<uint64_t> serial{0};
  std::string dir = PathOption("cache_dir");
  if (dir.empty()) return;
  StatusOr<std::string> payload = backend.Serialize(exe);
  if (!payload.ok()) return;  // a backend without a persistent format keeps the in-process tier only
  std::string path = EntryPath(dir, key, check, backend);
  std::string entry = EncodeEntry(key, check, graph, backend.version(), payload.value());
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  // Atomic publication: a unique temporary file in the same folder, renamed over the entry.
  std::string tmp = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(entry.data(), static_cast<std::streamsize>(entry.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      WarnOnce("cannot write to " + dir + " (full or not writable); programs are still cached in memory");
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    WarnOnce("cannot write " + path + ": " + ec.message());
    return;
  }
  writes->Add();
  std::lock_guard<std::mutex> lock(mu_);
  if (scanned_dir_ != dir) {
    scanned_dir_ = dir;
    total_bytes_ = stats().bytes;  // first store into this directory: measure it
  } else {
    total_bytes_ += static_cast<int64_t>(entry.size());
  }
  int64_t limit = Flags().cache_dir_max_mb * (int64_t{1} << 20);
  if (total_bytes_ > limit) EvictLocked(dir);
}

void PersistentCache::EvictLocked(const std::string& dir) {
  static Counter* evicted = GetCounter("compile_cache_disk_evictions");
  struct File {
    fs::path path;
    fs::file_time_type time;
    int64_t size;
  };
  std::vector<File> files;
  std::error_code ec;
  int64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != kSuffix) continue;
    File f{it->path(), it->last_write_time(ec), static_cast<int64_t>(it->file_size(ec))};
    total += f.size;
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.time < b.time; });
  int64_t target = Flags().cache_dir_max_mb * (int64_t{1} << 20) * 9 / 10;
  for (const File& f : files) {
    if (total <= target) break;
    if (fs::remove(f.path, ec)) {
      total -= f.size;
      evicted->Add();
    }
  }
  total_bytes_ = total;
}

DiskStats PersistentCache::stats() {
  DiskStats s;
  s.dir = PathOption("cache_dir");
  if (s.dir.empty()) return s;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(s.dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != kSuffix) continue;
    ++s.entries;
    s.bytes += static_cast<int64_t>(it->file_size(ec));
  }
  return s;
}

void PersistentCache::Clear() {
  std::string dir = PathOption("cache_dir");
  if (dir.empty()) return;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == kSuffix) entries.push_back(it->path());
  for (const auto& p : entries) fs::remove(p, ec);
  std::lock_guard<std::mutex> lock(mu_);
  total_bytes_ = 0;
  scanned_dir_.clear();
}

}  // namespace tpu
