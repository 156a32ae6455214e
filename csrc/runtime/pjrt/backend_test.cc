// The PJRT backend's plugin loading, client and devices, buffers of every dtype, and the choice
// of plugin.
#include "runtime/pjrt/backend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/pjrt/api.h"
#include "runtime/pjrt/client.h"
#include "runtime/pjrt/pjrt_test_util.h"

namespace tpu::pjrt::testing {
namespace {

TEST(PjrtApiTest, LoadsThePluginAndChecksItsVersion) {
  TPU_REQUIRE_PJRT_PLUGIN();
  auto api = Api::Load(TestPlugin());
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api.value()->major_version(), PJRT_API_MAJOR);
  EXPECT_GT(api.value()->minor_version(), 0);
  EXPECT_TRUE(TPU_PJRT_HAS(*api.value(), PJRT_Client_Compile));
  std::printf("plugin %s: PJRT C API %s (our header: %s)\n", TestPlugin().c_str(),
              api.value()->version_string().c_str(), HeaderVersion().c_str());
}

TEST(PjrtApiTest, AMajorVersionMismatchIsAClearError) {
  TPU_REQUIRE_PJRT_PLUGIN();
  PJRT_Api_Version v{};
  v.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  v.major_version = PJRT_API_MAJOR + 1;
  v.minor_version = 0;
  auto api = Api::Load(TestPlugin(), &v);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(api.status().message().find("implements PJRT C API 1.0"), std::string::npos) << api.status().message();
  EXPECT_NE(api.status().message().find("major versions differ"), std::string::npos) << api.status().message();
}

TEST(PjrtApiTest, AnOlderMinorVersionLoadsAndIsChecked) {
  // A plugin older than our header is accepted; what it lacks is found per function
  // (Note [PJRT struct sizes]).
  TPU_REQUIRE_PJRT_PLUGIN();
  PJRT_Api_Version v{};
  v.major_version = PJRT_API_MAJOR;
  v.minor_version = 30;
  auto api = Api::Load(TestPlugin(), &v);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api.value()->version_string(), "0.30");
}

TEST(PjrtApiTest, BadPluginPathsAreClearErrors) {
  auto missing = Api::Load("/nonexistent/pjrt_plugin.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("could not load the PJRT plugin /nonexistent/pjrt_plugin.so"),
            std::string::npos)
      << missing.status().message();
  // A shared library that is not a PJRT plugin.
  auto not_plugin = Api::Load("libm.so.6");
  ASSERT_FALSE(not_plugin.ok());
  EXPECT_NE(not_plugin.status().message().find("is not a PJRT plugin: it has no GetPjrtApi"), std::string::npos)
      << not_plugin.status().message();
  // A file that is not a library at all.
  std::string junk =
      (std::filesystem::temp_directory_path() / ("tpu_pjrt_junk_" + std::to_string(getpid()) + ".so")).string();
  std::ofstream(junk) << "not an ELF file";
  auto bad = Api::Load(junk);
  std::filesystem::remove(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("could not load the PJRT plugin"), std::string::npos);
}

TEST(PjrtClientTest, ParsesClientOptions) {
  auto o = ParseClientOptions(" cpu_device_count=2, asynchronous=true,name=abc ,f=0.5");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o.value().size(), 4u);
  EXPECT_EQ(o.value()[0].name, "cpu_device_count");
  EXPECT_EQ(o.value()[0].type, ClientOption::Type::kInt);
  EXPECT_EQ(o.value()[0].int_value, 2);
  EXPECT_EQ(o.value()[1].type, ClientOption::Type::kBool);
  EXPECT_TRUE(o.value()[1].bool_value);
  EXPECT_EQ(o.value()[2].type, ClientOption::Type::kString);
  EXPECT_EQ(o.value()[2].string_value, "abc");
  EXPECT_EQ(o.value()[3].type, ClientOption::Type::kFloat);
  EXPECT_TRUE(ParseClientOptions("").ok());
  EXPECT_FALSE(ParseClientOptions("novalue").ok());
  EXPECT_FALSE(ParseClientOptions("=3").ok());
}

TEST(PjrtBackendTest, EnumeratesDevicesWithProperties) {
  TPU_REQUIRE_PJRT_PLUGIN();
  Backend* b = TestBackend();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name(), "pjrt");
  EXPECT_FALSE(b->strided_bindings());
  ASSERT_GE(b->device_count(), 1);
  std::printf("%s\nversion: %s\n", b->description().c_str(), b->version().c_str());
  EXPECT_NE(b->version().find("pjrt/"), std::string::npos);
  EXPECT_NE(b->version().find("/api-0."), std::string::npos);
  for (int i = 0; i < b->device_count(); ++i) {
    const DeviceProperties& p = b->device(i).properties();
    EXPECT_EQ(p.index, i);
    EXPECT_FALSE(p.kind.empty());
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.memory_capacity, 0);
    EXPECT_EQ(b->device(i).allocator().capacity(), p.memory_capacity);
    std::printf("device %d: %s (kind '%s', capacity %.1f GiB, hbm %ld)\n", i, p.name.c_str(), p.kind.c_str(),
                p.memory_capacity / 1073741824.0, static_cast<long>(p.hbm_bytes));
  }
}

// Bytes that exercise every bit pattern a dtype can hold (bool: 0 and 1 only).
std::vector<uint8_t> PatternFor(DType dt, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(dt) * 7919u + 1);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * DTypeSize(dt)));
  for (auto& x : bytes) x = static_cast<uint8_t>(rng());
  if (dt == DType::kBool)
    for (auto& x : bytes) x &= 1;
  return bytes;
}

TEST(PjrtBufferTest, EveryDtypeRoundTripsThroughTheDevice) {
  TPU_REQUIRE_PJRT_PLUGIN();
  Backend* b = TestBackend();
  ASSERT_NE(b, nullptr);
  Device& d = b->device(0);
  // identity program per dtype: the buffer written from the host enters a program with its
  // dtype (reinterpreted on the device), and the result is read back.
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dt = static_cast<DType>(i);
    SCOPED_TRACE(DTypeName(dt));
    std::vector<uint8_t> host = PatternFor(dt, 37);
    DeviceBuffer in = Upload(d, host);
    EXPECT_EQ(Download<uint8_t>(d, in), host);  // bytes as written
    Builder bld;
    int x = bld.Param(T(dt, {37}));
    bld.Result(bld.Reshape(bld.Reshape(x, {37, 1}), {37}));
    auto g = bld.Finish();
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    CompileOptions co;
    co.name = "identity";
    auto exe = b->Compile(g.value(), co);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    DeviceBuffer out = NewBuffer(d, static_cast<int64_t>(host.size()));
    ASSERT_TRUE(LaunchAndWait(d, exe.value(), Bindings(in.Bind(T(dt, {37}))), Bindings(out.Bind(T(dt, {37})))).ok());
    EXPECT_EQ(Download<uint8_t>(d, out), host);
    EXPECT_EQ(Download<uint8_t>(d, in), host);  // the input, now typed, reads the same
  }
}

TEST(PjrtBufferTest, PartialWritesReadsAndCopies) {
  TPU_REQUIRE_PJRT_PLUGIN();
  Backend* b = TestBackend();
  ASSERT_NE(b, nullptr);
  Device& d = b->device(0);
  std::vector<int32_t> host(10);
  for (int i = 0; i < 10; ++i) host[i] = i * 11;
  DeviceBuffer buf = Upload(d, host);
  int32_t patch[3] = {-1, -2, -3};
  d.queue().Write(buf.buffer, 4 * 4, patch, sizeof(patch), TaskContext("patch"));
  for (int i = 0; i < 3; ++i) host[4 + i] = patch[i];
  EXPECT_EQ(Download<int32_t>(d, buf), host);
  int32_t part[2];
  ASSERT_TRUE(d.queue().Read(buf.buffer, 5 * 4, 8, part).ok());
  EXPECT_EQ(part[0], -2);
  EXPECT_EQ(part[1], -3);
  // Whole copy on the device, then a partial copy (through the host), and an overlapping one.
  DeviceBuffer dst = NewBuffer(d, 40);
  d.queue().Copy(buf.buffer, 0, dst.buffer, 0, 40, TaskContext("copy"));
  EXPECT_EQ(Download<int32_t>(d, dst), host);
  d.queue().Copy(buf.buffer, 0, dst.buffer, 8 * 4, 8, TaskContext("copy_part"));
  std::vector<int32_t> want = host;
  want[8] = host[0];
  want[9] = host[1];
  EXPECT_EQ(Download<int32_t>(d, dst), want);
  d.queue().Copy(dst.buffer, 0, dst.buffer, 4, 16, TaskContext("copy_overlap"));
  std::vector<int32_t> shifted = want;
  for (int i = 0; i < 4; ++i) shifted[1 + i] = want[i];
  EXPECT_EQ(Download<int32_t>(d, dst), shifted);
  // A buffer never written reads as zeros, and so does its copy.
  DeviceBuffer fresh = NewBuffer(d, 12);
  EXPECT_EQ(Download<int32_t>(d, fresh), std::vector<int32_t>(3, 0));
  DeviceBuffer copy = Upload(d, std::vector<int32_t>{7, 8, 9});
  d.queue().Copy(fresh.buffer, 0, copy.buffer, 0, 12, TaskContext("copy_unwritten"));
  EXPECT_EQ(Download<int32_t>(d, copy), std::vector<int32_t>(3, 0));
  EXPECT_TRUE(d.queue().Synchronize().ok());
}

TEST(PjrtBufferTest, ZeroSizedArrays) {
  TPU_REQUIRE_PJRT_PLUGIN();
  Backend* b = TestBackend();
  ASSERT_NE(b, nullptr);
  Device& d = b->device(0);
  Builder bld;
  int x = bld.Param(T(DType::kF32, {0, 3}));
  bld.Result(bld.Binary(OpCode::kAdd, x, x));
  bld.Result(bld.Reduce(x, bld.Constant(0.5, DType::kF32), {0}, ReduceKind::kAdd));
  auto g = bld.Finish();
  ASSERT_TRUE(g.ok());
  CompileOptions co;
  co.name = "empty";
  auto exe = b->Compile(g.value(), co);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  DeviceBuffer in = NewBuffer(d, 0), sum = NewBuffer(d, 0), red = NewBuffer(d, 12);
  ASSERT_TRUE(LaunchAndWait(d, exe.value(), Bindings(in.Bind(T(DType::kF32, {0, 3}))),
                            Bindings(sum.Bind(T(DType::kF32, {0, 3})), red.Bind(T(DType::kF32, {3}))))
                  .ok());
  EXPECT_EQ(Download<float>(d, red), std::vector<float>(3, 0.5f));
  EXPECT_TRUE(Download<float>(d, sum).empty());
}

TEST(PjrtAllocatorTest, AccountsBytesAgainstTheCapacity) {
  TPU_REQUIRE_PJRT_PLUGIN();
  Backend* b = TestBackend();
  ASSERT_NE(b, nullptr);
  Allocator& a = b->device(0).allocator();
  MemoryStats before = a.stats();
  {
    auto lazy = a.Allocate(1000, /*materialize=*/false);
    ASSERT_TRUE(lazy.ok());
    EXPECT_EQ(a.stats().allocated, before.allocated);  // nothing until materialized
    ASSERT_TRUE(a.Materialize(lazy.value()).ok());
    ASSERT_TRUE(a.Materialize(lazy.value()).ok());  // once
    EXPECT_EQ(a.stats().allocated, before.allocated + 1000);
    lazy.value()->Release();
  }
  EXPECT_EQ(a.stats().allocated, before.allocated);
  auto huge = a.Allocate(a.capacity() + 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("out of memory"), std::string::npos);
}

#ifdef TPU_PJRT_HANGING_PLUGIN
TEST(PjrtClientTest, APluginThatHangsIsAbandonedAfterTheTimeout) {
  auto api = Api::Load(TPU_PJRT_HANGING_PLUGIN);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto t0 = std::chrono::steady_clock::now();
  auto client = Client::Create(std::move(api).value(), {}, 1.0);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("did not finish initializing and creating a client within 1 s"),
            std::string::npos)
      << client.status().message();
  EXPECT_LT(s, 3.0);
}
#endif

// ---- choosing the plugin --------------------------------------------------------------------

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "tpu_pjrt_test_XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string File(const std::string& name) {
    std::ofstream(path / name) << "x";
    return (path / name).string();
  }
};

TEST(PjrtSelectionTest, OptionThenCandidatesAndLibtpuOnlyWithATpu) {
  TempDir dir;
  std::string libtpu = dir.File("libtpu.so"), cpu = dir.File("pjrt_c_api_cpu_plugin.so");
  std::string missing = (dir.path / "absent.so").string();
  EXPECT_TRUE(IsLibtpu(libtpu));
  EXPECT_FALSE(IsLibtpu(cpu));
  // The option wins, even libtpu without a TPU (the user asked for it).
  EXPECT_EQ(ChoosePlugin(libtpu, {cpu}, false).value(), libtpu);
  auto bad = ChoosePlugin(missing, {cpu}, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TORCH_TPU_PJRT_PLUGIN=" + missing + ": no such file"), std::string::npos);
  // Candidates in order: libtpu only where a TPU is present; missing files skipped.
  EXPECT_EQ(ChoosePlugin("", {missing, libtpu, cpu}, true).value(), libtpu);
  EXPECT_EQ(ChoosePlugin("", {missing, libtpu, cpu}, false).value(), cpu);
  auto none = ChoosePlugin("", {missing, libtpu}, false);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no PJRT plugin found"), std::string::npos);
  EXPECT_NE(none.status().message().find("libtpu skipped: no TPU here"), std::string::npos);
  EXPECT_EQ(SplitPaths("a:b::c:"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(PjrtSelectionTest, FindsATpuByPciVendor) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "0000:00:04.0");
  std::ofstream(dir.path / "0000:00:04.0" / "vendor") << "0x8086\n";
  EXPECT_FALSE(TpuPresent(dir.path.string()));
  std::filesystem::create_directories(dir.path / "0000:00:05.0");
  std::ofstream(dir.path / "0000:00:05.0" / "vendor") << "0x1ae0\n";
  EXPECT_TRUE(TpuPresent(dir.path.string()));
  EXPECT_FALSE(TpuPresent((dir.path / "none").string()));
}

}  // namespace
}  // namespace tpu::pjrt::testing
