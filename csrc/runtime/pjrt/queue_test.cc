// The PJRT backend behind a device's WorkerQueue: ordering of launches and copies, donation,
// errors (a program XLA rejects, one that fails while running), the persistent executable
// format, a second device; and a benchmark (disabled by default).
#include <chrono>
#include <cmath>

#include "runtime/host/executor.h"
#include "runtime/host/host_backend.h"
#include "runtime/pjrt/api.h"
#include "runtime/pjrt/buffers.h"
#include "runtime/pjrt/compile.h"
#include "runtime/pjrt/pjrt_test_util.h"

namespace tpu::pjrt::testing {
namespace {

const DType F = DType::kF32;

class PjrtQueueTest : public ::testing::Test {
 public:
  void SetUp() override {
    TPU_REQUIRE_PJRT_PLUGIN();
    backend_ = TestBackend();
    ASSERT_NE(backend_, nullptr);
  }
  ExecutablePtr Compile(Builder& b, const char* name, SmallVector<int, 4> donated = {}) {
    auto g = b.Finish();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return nullptr;
    CompileOptions o;
    o.name = name;
    o.donated = std::move(donated);
    auto exe = backend_->Compile(g.value(), o);
    EXPECT_TRUE(exe.ok()) << exe.status().ToString();
    return exe.ok() ? exe.value() : nullptr;
  }
  uint64_t Submit(const ExecutablePtr& exe, std::vector<Binding> params, std::vector<Binding> results,
                  const char* op = "test_op") {
    return device().queue().Launch(exe, params.data(), params.size(), results.data(), results.size(), TaskContext(op),
                                   false);
  }
  Device& device() { return backend_->device(0); }
  Backend* backend_ = nullptr;
};

// x + c, in place when the result is bound to x's buffer.
ExecutablePtr AddConstant(PjrtQueueTest* t, float c, int64_t n, SmallVector<int, 4> donated = {}) {
  Builder b;
  int x = b.Param(T(F, {n}));
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(c, x)));
  return t->Compile(b, "add_constant", std::move(donated));
}

TEST_F(PjrtQueueTest, LaunchesWritesAndCopiesRunInOrder) {
  const int64_t n = 8;
  ExecutablePtr inc = AddConstant(this, 1.0f, n);
  ASSERT_NE(inc, nullptr);
  Device& d = device();
  DeviceBuffer acc = NewBuffer(d, n * 4), snap = NewBuffer(d, n * 4);
  std::vector<float> want(n, 0.0f);
  d.queue().Write(acc.buffer, 0, want.data(), n * 4, TaskContext("zero"));
  for (int i = 0; i < 100; ++i) {
    Submit(inc, Bindings(acc.Bind(T(F, {n}))), Bindings(acc.Bind(T(F, {n}))));
    for (float& v : want) v += 1;
    if (i == 40) {  // a host write between launches lands between them
      float hundred[2] = {1000, 2000};
      d.queue().Write(acc.buffer, 4, hundred, 8, TaskContext("write"));
      want[1] = 1000, want[2] = 2000;
    }
    if (i == 70) d.queue().Copy(acc.buffer, 0, snap.buffer, 0, n * 4, TaskContext("snapshot"));
  }
  std::vector<float> at70(n);
  for (int k = 0; k < n; ++k) at70[k] = want[k] - 29;
  EXPECT_EQ(Download<float>(d, acc), want);
  EXPECT_EQ(Download<float>(d, snap), at70);
  EXPECT_TRUE(d.queue().Synchronize().ok());
}

TEST_F(PjrtQueueTest, DonatedBuffersAreUpdatedInTheirOwnMemory) {
  const int64_t n = 1024;
  ExecutablePtr inc = AddConstant(this, 1.0f, n, {0});
  ASSERT_NE(inc, nullptr);
  const auto* pe = dynamic_cast<const PjrtExecutable*>(inc.get());
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->program().aliased, std::vector<int>{0});
  EXPECT_NE(MakeProgram(inc->source(), [] {
              CompileOptions o;
              o.donated = {0};
              return o;
            }()).text.find("%arg0: tensor<1024xf32> {tf.aliasing_output = 0 : i32}"),
            std::string::npos);
  Device& d = device();
  DeviceBuffer x = Upload(d, std::vector<float>(n, 1.0f));
  ASSERT_TRUE(d.queue().WaitFor(Submit(inc, Bindings(x.Bind(T(F, {n}))), Bindings(x.Bind(T(F, {n}))))).ok());
  auto api = Api::Load(TestPlugin());
  ASSERT_TRUE(api.ok());
  auto address = [&](Buffer* b) -> uintptr_t {
    if (!TPU_PJRT_HAS(*api.value(), PJRT_Buffer_UnsafePointer)) return 0;
    auto args = TPU_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args);
    args.buffer = PjrtBufferOf(b);
    return api.value()->ToStatus((*api.value())->PJRT_Buffer_UnsafePointer(&args), "UnsafePointer").ok()
               ? args.buffer_pointer
               : 0;
  };
  uintptr_t before = address(x.buffer);
  ASSERT_TRUE(d.queue().WaitFor(Submit(inc, Bindings(x.Bind(T(F, {n}))), Bindings(x.Bind(T(F, {n}))))).ok());
  EXPECT_EQ(Download<float>(d, x), std::vector<float>(n, 3.0f));
  if (before == 0) GTEST_SKIP() << "the plugin gives no buffer addresses: donation checked by values only";
  EXPECT_EQ(address(x.buffer), before) << "the donated input's memory was not reused";
  // Bound to another result buffer, the input is not donated: it keeps its value.
  DeviceBuffer y = NewBuffer(d, n * 4);
  ASSERT_TRUE(d.queue().WaitFor(Submit(inc, Bindings(x.Bind(T(F, {n}))), Bindings(y.Bind(T(F, {n}))))).ok());
  EXPECT_EQ(Download<float>(d, x), std::vector<float>(n, 3.0f));
  EXPECT_EQ(Download<float>(d, y), std::vector<float>(n, 4.0f));
}

TEST_F(PjrtQueueTest, ABufferBoundTwiceIsNotDonated) {
  const int64_t n = 16;
  Builder b;
  int x = b.Param(T(F, {n})), y = b.Param(T(F, {n}));
  b.Result(b.Binary(OpCode::kAdd, x, y));
  ExecutablePtr add = Compile(b, "add_donated", {0, -1});
  ASSERT_NE(add, nullptr);
  Device& d = device();
  DeviceBuffer a = Upload(d, std::vector<float>(n, 2.5f));
  ASSERT_TRUE(d.queue().WaitFor(Submit(add, Bindings(a.Bind(T(F, {n})), a.Bind(T(F, {n}))),
                                       Bindings(a.Bind(T(F, {n})))))
                  .ok());
  EXPECT_EQ(Download<float>(d, a), std::vector<float>(n, 5.0f));
}

TEST_F(PjrtQueueTest, AProgramXlaRejectsIsAnErrorNamingIt) {
  // Built by hand past the builder's checks: contracting dimensions of sizes 2 and 3.
  Graph g;
  g.params = {T(F, {2, 3}), T(F, {4, 3})};
  Op dot{OpCode::kDotGeneral, {0, 1}, T(F, {3, 4}), {}};
  dot.attrs.c = {0};
  dot.attrs.d = {1};
  g.ops.push_back(dot);
  g.results = {2};
  CompileOptions o;
  o.name = "bad_dot";
  auto exe = backend_->Compile(g, o);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("could not compile program 'bad_dot'"), std::string::npos)
      << exe.status().message();
  EXPECT_GT(exe.status().message().size(), std::string("XLA (cpu) could not compile program 'bad_dot': ").size() + 10)
      << "the plugin's own message is missing: " << exe.status().message();
  std::printf("%s\n", exe.status().ToString().c_str());
}

TEST_F(PjrtQueueTest, AFailedLaunchNamesItsOpAndItsConsumersDoNotRun) {
  Device& d = device();
  Builder gb;
  int t = gb.Param(T(F, {5, 2})), ids = gb.Param(T(DType::kI64, {2, 1}));
  gb.Result(gb.Gather(t, ids, {1}, {0}, {0}, {1, 2}));
  ExecutablePtr gather = Compile(gb, "gather");
  ExecutablePtr inc = AddConstant(this, 1.0f, 4);
  ASSERT_NE(gather, nullptr);
  ASSERT_NE(inc, nullptr);
  DeviceBuffer table = Upload(d, std::vector<float>(10, 1.0f));
  DeviceBuffer bad = Upload(d, std::vector<int64_t>{1, 9});
  DeviceBuffer rows = NewBuffer(d, 16), next = NewBuffer(d, 16);
  uint64_t s1 = Submit(gather, Bindings(table.Bind(T(F, {5, 2})), bad.Bind(T(DType::kI64, {2, 1}))),
                       Bindings(rows.Bind(T(F, {2, 2}))), "aten::index_select");
  uint64_t s2 = Submit(inc, Bindings(rows.Bind(T(F, {4}))), Bindings(next.Bind(T(F, {4}))), "aten::add");
  EXPECT_EQ(d.queue().WaitFor(s1).code(), Code::kOutOfRange);
  (void)d.queue().WaitFor(s2);
  // The consumer did not run on the failed result: its own result has no value, and reading it
  // names the op that failed.
  Status st = d.queue().SyncBuffer(next.buffer);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("aten::index_select"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("index 9 is out of bounds for dimension 0 with size 5"), std::string::npos)
      << st.message();
  EXPECT_TRUE(d.queue().Done(s1));
  std::vector<float> host(4);
  EXPECT_FALSE(d.queue().Read(next.buffer, 0, 16, host.data()).ok());  // never computed
  // The device stays usable.
  DeviceBuffer good = Upload(d, std::vector<int64_t>{4, 0});
  ASSERT_TRUE(d.queue().WaitFor(Submit(gather, Bindings(table.Bind(T(F, {5, 2})), good.Bind(T(DType::kI64, {2, 1}))),
                                       Bindings(rows.Bind(T(F, {2, 2})))))
                  .ok());
  EXPECT_EQ(Download<float>(d, rows), std::vector<float>(4, 1.0f));
  (void)d.queue().Synchronize();
}

TEST_F(PjrtQueueTest, ACheckOpFailsItsProgramWithItsMessage) {
  // Note [Check op]: (x // y) for i64, checked for zeros in y; then an index check after it.
  Device& d = device();
  const DType I = DType::kI64;
  Builder b;
  int x = b.Param(T(I, {3})), y = b.Param(T(I, {3})), ids = b.Param(T(I, {1, 1}));
  int q = b.Check(b.Binary(OpCode::kDivide, x, y), b.Compare(CompareDirection::kNE, y, b.ScalarLike(0, y)),
                  CheckKind::kIntegerDivisionByZero);
  b.Result(q);
  b.Result(b.Gather(q, ids, {}, {0}, {0}, {1}));
  ExecutablePtr exe = Compile(b, "checked_division");
  ASSERT_NE(exe, nullptr);
  DeviceBuffer xs = Upload(d, std::vector<int64_t>{7, -9, 12}), out = NewBuffer(d, 24), picked = NewBuffer(d, 8);
  DeviceBuffer in_range = Upload(d, std::vector<int64_t>{2}), out_of_range = Upload(d, std::vector<int64_t>{3});
  auto run = [&](const std::vector<int64_t>& divisors, const DeviceBuffer& idx) {
    DeviceBuffer ys = Upload(d, divisors);
    return d.queue().WaitFor(Submit(exe, Bindings(xs.Bind(T(I, {3})), ys.Bind(T(I, {3})), idx.Bind(T(I, {1, 1}))),
                                    Bindings(out.Bind(T(I, {3})), picked.Bind(T(I, {1}))), "aten::floor_divide"));
  };
  ASSERT_TRUE(run({2, 3, -4}, in_range).ok());
  EXPECT_EQ(Download<int64_t>(d, out), (std::vector<int64_t>{3, -3, -3}));  // XLA divides toward zero
  EXPECT_EQ(Download<int64_t>(d, picked), (std::vector<int64_t>{-3}));
  Status st = run({2, 0, -4}, out_of_range);  // both fail: the first in program order is reported
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "aten::floor_divide: ZeroDivisionError");
  EXPECT_FALSE(d.queue().SyncBuffer(out.buffer).ok());  // no value
  EXPECT_EQ(run({2, 3, -4}, out_of_range).code(), Code::kOutOfRange);  // the index check still works
  ASSERT_TRUE(run({1, 1, 1}, in_range).ok());  // the device stays usable
  EXPECT_EQ(Download<int64_t>(d, out), (std::vector<int64_t>{7, -9, 12}));
  (void)d.queue().Synchronize();
}

TEST_F(PjrtQueueTest, ExecutablesSerializeAndLoadAgain) {
  Builder b;
  int x = b.Param(T(F, {3})), ids = b.Param(T(DType::kI32, {2, 1}));
  b.Result(b.Gather(b.Unary(OpCode::kExp, x), ids, {}, {0}, {0}, {1}));
  ExecutablePtr exe = Compile(b, "serialized");
  ASSERT_NE(exe, nullptr);
  auto bytes = backend_->Serialize(*exe);
  if (!bytes.ok() && bytes.status().code() == Code::kUnimplemented) GTEST_SKIP() << bytes.status().ToString();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_GT(bytes.value().size(), 100u);
  CompileOptions o;
  o.name = "serialized";
  auto loaded = backend_->Deserialize(bytes.value(), exe->source(), o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Device& d = device();
  DeviceBuffer in = Upload(d, std::vector<float>{0.0f, 1.0f, 2.0f});
  DeviceBuffer idx = Upload(d, std::vector<int32_t>{2, 0});
  DeviceBuffer out = NewBuffer(d, 8);
  ASSERT_TRUE(d.queue().WaitFor(Submit(loaded.value(), Bindings(in.Bind(T(F, {3})), idx.Bind(T(DType::kI32, {2, 1}))),
                                       Bindings(out.Bind(T(F, {2})))))
                  .ok());
  std::vector<float> got = Download<float>(d, out);
  EXPECT_NEAR(got[0], std::exp(2.0f), 1e-5);
  EXPECT_EQ(got[1], 1.0f);
  // Its index checks come back with it.
  DeviceBuffer bad = Upload(d, std::vector<int32_t>{3, 0});
  Status st = d.queue().WaitFor(Submit(loaded.value(), Bindings(in.Bind(T(F, {3})), bad.Bind(T(DType::kI32, {2, 1}))),
                                       Bindings(out.Bind(T(F, {2})))));
  EXPECT_EQ(st.code(), Code::kOutOfRange) << st.ToString();
}

TEST_F(PjrtQueueTest, ASecondDeviceRunsItsOwnQueue) {
  ASSERT_TRUE(Options::Get().Set("num_devices", "2").ok());
  PjrtBackendOptions o;
  o.plugin = TestPlugin();
  o.client_options = "cpu_device_count=2";
  auto two = MakePjrtBackend(o);
  ASSERT_TRUE(Options::Get().Set("num_devices", "1").ok());
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ASSERT_EQ(two.value()->device_count(), 2);
  Builder b;
  int x = b.Param(T(F, {4}));
  b.Result(b.Binary(OpCode::kMultiply, x, x));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok());
  CompileOptions co;
  co.name = "square";
  auto exe = two.value()->Compile(g.value(), co);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  for (int i = 0; i < 2; ++i) {
    Device& d = two.value()->device(i);
    DeviceBuffer in = Upload(d, std::vector<float>{1, 2, 3, static_cast<float>(i)});
    DeviceBuffer out = NewBuffer(d, 16);
    Status st = LaunchAndWait(d, exe.value(), Bindings(in.Bind(T(F, {4}))), Bindings(out.Bind(T(F, {4}))));
    ASSERT_TRUE(st.ok()) << "device " << i << ": " << st.ToString();
    EXPECT_EQ(Download<float>(d, out), (std::vector<float>{1, 4, 9, static_cast<float>(i * i)}));
  }
}

// ---- benchmark: run with --gtest_also_run_disabled_tests --gtest_filter='*PjrtBenchmark*' -----

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST_F(PjrtQueueTest, DISABLED_PjrtBenchmark) {
  Device& d = device();
  const int64_t n = 16;
  ExecutablePtr inc = AddConstant(this, 1.0f, n);
  ASSERT_NE(inc, nullptr);
  DeviceBuffer x = Upload(d, std::vector<float>(n, 0.0f)), y = NewBuffer(d, n * 4);
  const int iters = 3000;
  for (bool inline_ok : {false, true}) {
    for (int i = 0; i < 100; ++i)
      ASSERT_TRUE(LaunchAndWait(d, inc, Bindings(x.Bind(T(F, {n}))), Bindings(y.Bind(T(F, {n})))).ok());
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      std::vector<Binding> p = Bindings(x.Bind(T(F, {n}))), r = Bindings(y.Bind(T(F, {n})));
      uint64_t seq = d.queue().Launch(inc, p.data(), 1, r.data(), 1, TaskContext("bench"), inline_ok);
      ASSERT_TRUE(d.queue().WaitFor(seq).ok());
    }
    std::printf("tiny execute (f32[%ld] + 1), launch + wait%s: %.2f us per launch\n", static_cast<long>(n),
                inline_ok ? " (inline on the caller)" : " (queue worker)", Seconds(t0) / iters * 1e6);
  }
  {
    // The floor: PJRT_LoadedExecutable_Execute and the wait for its completion event alone, on
    // the same executable and input array.
    auto api = Api::Load(TestPlugin());
    ASSERT_TRUE(api.ok());
    const Api& a = *api.value();
    const auto* pe = dynamic_cast<const PjrtExecutable*>(inc.get());
    PJRT_Buffer* arg = PjrtBufferOf(x.buffer);
    auto dev = TPU_PJRT_ARGS(PJRT_Buffer_Device_Args);
    dev.buffer = arg;
    ASSERT_TRUE(a.ToStatus(a->PJRT_Buffer_Device(&dev), "device").ok());
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      PJRT_Buffer* out = nullptr;
      PJRT_Buffer* const args[1] = {arg};
      PJRT_Buffer* const* arg_lists[1] = {args};
      PJRT_Buffer** outs[1] = {&out};
      PJRT_Event* done = nullptr;
      auto options = TPU_PJRT_ARGS(PJRT_ExecuteOptions);
      auto call = TPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
      call.executable = pe->loaded();
      call.options = &options;
      call.argument_lists = arg_lists;
      call.num_devices = 1;
      call.num_args = 1;
      call.output_lists = outs;
      call.device_complete_events = &done;
      call.execute_device = dev.device;
      ASSERT_TRUE(a.ToStatus(a->PJRT_LoadedExecutable_Execute(&call), "execute").ok());
      ASSERT_TRUE(a.AwaitAndDestroy(done, "await").ok());
      DestroyBuffer(a, out);
    }
    std::printf("raw PJRT_LoadedExecutable_Execute + await + destroy the output: %.2f us\n", Seconds(t0) / iters * 1e6);
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) Submit(inc, Bindings(x.Bind(T(F, {n}))), Bindings(y.Bind(T(F, {n}))));
  ASSERT_TRUE(d.queue().Synchronize().ok());
  std::printf("tiny execute, %d launches queued back to back: %.2f us per launch\n", iters, Seconds(t0) / iters * 1e6);

  const int64_t m = 1024;
  Builder b;
  int a = b.Param(T(F, {m, m})), c = b.Param(T(F, {m, m}));
  b.Result(b.DotGeneral(a, c, {}, {}, {1}, {0}, F));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok());
  CompileOptions co;
  co.name = "dot1024";
  auto exe = backend_->Compile(g.value(), co);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  std::vector<float> host(m * m);
  for (int64_t i = 0; i < m * m; ++i) host[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  DeviceBuffer da = Upload(d, host), dc = Upload(d, host), out = NewBuffer(d, m * m * 4);
  auto dot = [&] {
    return LaunchAndWait(d, exe.value(), Bindings(da.Bind(T(F, {m, m})), dc.Bind(T(F, {m, m}))),
                         Bindings(out.Bind(T(F, {m, m}))));
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(dot().ok());
  const int reps = 10;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) ASSERT_TRUE(dot().ok());
  double per = Seconds(t0) / reps;
  std::printf("1024^3 f32 dot on PJRT (%s): %.2f ms, %.1f GFLOP/s\n", backend_->description().c_str(), per * 1e3,
              2.0 * m * m * m / per / 1e9);
  // The host executor on the same problem, for scale.
  auto hexe = host::CompileForHost(g.value(), co);
  ASSERT_TRUE(hexe.ok());
  std::vector<float> hout(m * m);
  host::HostExecutor hx;
  auto hdot = [&] {
    tpu::Launch l{ExecutablePtr(hexe.value()),
             Bindings(Binding::External(host.data(), F, {m, m}), Binding::External(host.data(), F, {m, m})),
             Bindings(Binding::External(hout.data(), F, {m, m}))};
    RunReport report;
    return hx.Run(l, &report);
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(hdot().ok());
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) ASSERT_TRUE(hdot().ok());
  per = Seconds(t0) / reps;
  std::printf("1024^3 f32 dot on the host executor: %.2f ms, %.1f GFLOP/s\n", per * 1e3, 2.0 * m * m * m / per / 1e9);
  std::vector<float> got = Download<float>(d, out);
  double worst = 0;
  for (int64_t i = 0; i < m * m; ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - hout[i]) / (1 + std::fabs(hout[i])));
  std::printf("largest relative difference PJRT vs host: %.2e\n", worst);
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace tpu::pjrt::testing
