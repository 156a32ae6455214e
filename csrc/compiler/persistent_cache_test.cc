// The persistent tier (Note [Cache entries]) and recompile reasons, with the fake backend.
#include "compiler/persistent_cache.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/metrics.h"
#include "base/options.h"
#include "compiler/test_backend.h"
#include "ir/builder.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;

Graph AddN(int n, double c = 1.0) {
  Builder b;
  int x = b.Param(TensorType{DType::kF32, {n}});
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(c, x)));
  return std::move(b.Finish()).value();
}

CompileOptions Named(const char* name) {
  CompileOptions o;
  o.name = name;
  return o;
}

int64_t Count(const char* name) { return GetCounter(name)->value(); }

class PersistentCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpu_cache_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ASSERT_TRUE(Options::Get().Set("cache_dir", dir_.string()).ok());
    ASSERT_TRUE(Options::Get().Set("cache_dir_min_compile_us", "0").ok());  // persist even instant compiles
    CompileCache::Get().Clear();
  }
  void TearDown() override {
    CompileCache::Get().Clear();
    ASSERT_TRUE(Options::Get().Set("cache_dir", "").ok());
    ASSERT_TRUE(Options::Get().Set("cache_only", "0").ok());
    ASSERT_TRUE(Options::Get().Set("cache_dir_max_mb", "2048").ok());
    ASSERT_TRUE(Options::Get().Set("cache_dir_min_compile_us", "2000").ok());
    fs::remove_all(dir_);
  }
  StatusOr<ExecutablePtr> Get(const Graph& g, FakeBackend& b, const char* name = "p") {
    return CompileCache::Get().GetOrCompile(g, b, Named(name));
  }
  std::vector<fs::path> Entries() {
    std::vector<fs::path> out;
    for (auto& e : fs::recursive_directory_iterator(dir_))
      if (e.path().extension() == ".tpuexe") out.push_back(e.path());
    return out;
  }
  fs::path dir_;
};

TEST_F(PersistentCacheTest, AnotherProcessLoadsInsteadOfCompiling) {
  FakeBackend first;
  ASSERT_TRUE(Get(AddN(8), first, "add8").ok());
  EXPECT_EQ(first.compiles, 1);
  ASSERT_EQ(Entries().size(), 1u);
  // A new process: empty in-process tier, a new backend object of the same build.
  CompileCache::Get().Clear();
  FakeBackend second;
  const int64_t d0 = Count("compile_cache_disk_hits");
  auto exe = Get(AddN(8), second, "add8");
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(second.compiles, 0);
  EXPECT_EQ(second.loads, 1);
  EXPECT_EQ(Count("compile_cache_disk_hits") - d0, 1);
  EXPECT_TRUE(StructurallyEqual(exe.value()->source(), AddN(8)));
  EXPECT_EQ(exe.value()->name(), "add8");
  // Another backend build never sees the entry (its own folder).
  CompileCache::Get().Clear();
  FakeBackend other("fake", "2");
  ASSERT_TRUE(Get(AddN(8), other).ok());
  EXPECT_EQ(other.compiles, 1);
  EXPECT_EQ(other.loads, 0);
}

TEST_F(PersistentCacheTest, CorruptTruncatedAndForeignEntriesAreRecompiledNotTrusted) {
  FakeBackend b;
  ASSERT_TRUE(Get(AddN(4), b).ok());
  fs::path entry = Entries().at(0);
  std::string good;
  {
    std::ifstream in(entry, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto rewrite = [&](const std::string& bytes) {
    std::ofstream out(entry, std::ios::binary | std::ios::trunc);
    out << bytes;
  };
  auto reload = [&](const char* what) {
    CompileCache::Get().Clear();
    int before = b.compiles;
    const int64_t r0 = Count("compile_cache_disk_rejected");
    auto exe = Get(AddN(4), b);
    ASSERT_TRUE(exe.ok()) << what;
    EXPECT_EQ(b.compiles, before + 1) << what << ": recompiled";
    EXPECT_EQ(Count("compile_cache_disk_rejected") - r0, 1) << what << ": counted";
    std::ifstream in(entry, std::ios::binary);
    std::string now(std::istreambuf_iterator<char>(in), {});
    EXPECT_EQ(now, good) << what << ": the entry is replaced";
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  rewrite(flipped);
  reload("a flipped byte");
  rewrite(good.substr(0, good.size() - 7));
  reload("truncated");
  rewrite("");
  reload("empty");
  // The entry's own key, from its name (<key><check>.tpuexe), so the checks below are reached.
  std::string stem = entry.stem().string();
  uint64_t key = std::stoull(stem.substr(0, 16), nullptr, 16), check = std::stoull(stem.substr(16, 16), nullptr, 16);
  ASSERT_TRUE(PersistentCache::DecodeEntry(PersistentCache::EncodeEntry(key, check, AddN(4), b.version(), "fake:p")).ok());
  // Another build's entry under this key (a foreign version): refused though its checksum holds.
  rewrite(PersistentCache::EncodeEntry(key, check, AddN(4), "fake-0.9", "fake:p"));
  reload("foreign");
  // An entry holding another program under this key (a collision).
  rewrite(PersistentCache::EncodeEntry(key, check, AddN(5), b.version(), "fake:p"));
  reload("another program");
  // Another key's entry copied under this name.
  rewrite(PersistentCache::EncodeEntry(key + 1, check, AddN(4), b.version(), "fake:p"));
  reload("another key");
  // A payload the backend cannot read.
  rewrite(PersistentCache::EncodeEntry(key, check, AddN(4), b.version(), "junk"));
  reload("bad payload");
}

TEST_F(PersistentCacheTest, DecodingRefusesEveryDamagedForm) {
  Graph g = AddN(3);
  std::string e = PersistentCache::EncodeEntry(7, 9, g, "v", "payload");
  auto d = PersistentCache::DecodeEntry(e);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->key, 7u);
  EXPECT_EQ(d->check, 9u);
  EXPECT_EQ(d->backend_version, "v");
  EXPECT_EQ(d->payload, "payload");
  EXPECT_TRUE(StructurallyEqual(d->graph, g));
  for (size_t cut = 0; cut < e.size(); cut += 3) EXPECT_FALSE(PersistentCache::DecodeEntry(e.substr(0, cut)).ok()) << cut;
  for (size_t i = 0; i < e.size(); i += 5) {
    std::string bad = e;
    bad[i] ^= 0x01;
    EXPECT_FALSE(PersistentCache::DecodeEntry(bad).ok()) << i;
  }
}

TEST_F(PersistentCacheTest, ConcurrentWritersLeaveOnlyWholeEntries) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      FakeBackend b;
      for (int i = 1; i <= 40; ++i) {
        // Separate in-process caches are not possible in one process: write straight to disk,
        // every thread the same entries (the worst case for torn writes).
        Graph g = AddN(i);
        auto exe = b.Compile(g, Named("w"));
        PersistentCache::Get().Store(Fingerprint(g), static_cast<uint64_t>(i), g, *exe.value(), b);
      }
      (void)t;
    });
  for (auto& th : threads) th.join();
  auto files = Entries();
  EXPECT_EQ(files.size(), 40u);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    EXPECT_TRUE(PersistentCache::DecodeEntry(bytes).ok()) << f;
  }
  for (auto& e : fs::recursive_directory_iterator(dir_)) EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos);
}

TEST_F(PersistentCacheTest, TheDirectoryStaysWithinItsBound) {
  ASSERT_TRUE(Options::Get().Set("cache_dir_max_mb", "1").ok());
  FakeBackend b;
  // Programs of about 30 KiB each (many ops), 100 of them: 3 MiB written through a 1 MiB bound.
  for (int i = 0; i < 100; ++i) {
    Builder bl;
    int x = bl.Param(TensorType{DType::kF32, {i + 1}});
    for (int k = 0; k < 200; ++k) x = bl.Binary(OpCode::kAdd, x, x);
    bl.Result(x);
    ASSERT_TRUE(Get(std::move(bl.Finish()).value(), b).ok());
  }
  DiskStats s = PersistentCache::Get().stats();
  EXPECT_LE(s.bytes, int64_t{1} << 20);
  EXPECT_GT(s.entries, 5);
  EXPECT_GT(Count("compile_cache_disk_evictions"), 0);
}

TEST_F(PersistentCacheTest, CacheOnlyModeNamesTheProgramAndWhyItMissed) {
  FakeBackend b;
  ASSERT_TRUE(Get(AddN(16), b, "step").ok());
  ASSERT_TRUE(Options::Get().Set("cache_only", "1").ok());
  EXPECT_TRUE(Get(AddN(16), b, "step").ok());  // a hit is fine
  auto miss = Get(AddN(17), b, "step");
  ASSERT_FALSE(miss.ok());
  const std::string& m = miss.status().message();
  EXPECT_NE(m.find("cache-only mode"), std::string::npos) << m;
  EXPECT_NE(m.find("'step'"), std::string::npos) << m;
  EXPECT_NE(m.find("input_shape: input 0 is tensor<17xf32>, was tensor<16xf32>"), std::string::npos) << m;
}

TEST_F(PersistentCacheTest, EveryCompileRecordsItsReason) {
  ASSERT_TRUE(Options::Get().Set("cache_dir", "").ok());
  FakeBackend b;
  const int64_t shape0 = Count("compile_reasons/input_shape"), attr0 = Count("compile_reasons/attribute");
  ASSERT_TRUE(Get(AddN(4), b, "a").ok());
  ASSERT_TRUE(Get(AddN(6), b, "b").ok());
  ASSERT_TRUE(Get(AddN(6, 3.0), b, "c").ok());
  auto log = CompileCache::Get().Compiles();
  ASSERT_GE(log.size(), 3u);
  auto n = log.size();
  EXPECT_EQ(log[n - 3].reason, CompileReason::kNew);
  EXPECT_EQ(log[n - 2].reason, CompileReason::kInputShape);
  EXPECT_EQ(log[n - 2].what, "input 0 is tensor<6xf32>, was tensor<4xf32>");
  EXPECT_EQ(log[n - 1].reason, CompileReason::kAttribute);
  EXPECT_NE(log[n - 1].what.find("attribute f differs (3.0"), std::string::npos) << log[n - 1].what;
  EXPECT_EQ(Count("compile_reasons/input_shape") - shape0, 1);
  EXPECT_EQ(Count("compile_reasons/attribute") - attr0, 1);
}

}  // namespace
}  // namespace tpu
