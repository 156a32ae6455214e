// Fusion and buffer planning (PlanExecutable), run through the host backend's compile.
#include "runtime/host/plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/host/host_backend.h"
#include "runtime/host/host_test_util.h"
#include "ir/builder.h"

namespace tpu::host {
namespace {

using testing::SoftmaxChain;

TensorType T(DType dt, Dims dims) { return TensorType{dt, std::move(dims)}; }

std::shared_ptr<const HostExecutable> CompileOk(Builder& b) {
  auto g = b.Finish();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  CompileOptions options;
  options.name = "fusion_test";
  auto exe = CompileForHost(g.value(), options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  return exe.ok() ? exe.value() : nullptr;
}

TEST(FusionTest, ElementwiseChainIsOneRegion) {
  Builder b;
  int x = b.Param(T(DType::kF32, {4}));       // value 0
  int y = b.Param(T(DType::kBF16, {3, 4}));   // value 1
  int z = b.Param(T(DType::kF32, {3, 4}));    // value 2
  int bx = b.BroadcastInDim(x, {3, 4}, {1});  // op 0, value 3
  int cy = b.Convert(y, DType::kF32);         // op 1, value 4
  int s = b.Binary(OpCode::kAdd, bx, cy);     // op 2, value 5
  int m = b.Binary(OpCode::kMultiply, s, z);  // op 3, value 6
  b.Result(m);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->regions.size(), 1u);
  const FusedRegion& r = exe->regions[0];
  EXPECT_EQ(r.shape, (Dims{3, 4}));
  EXPECT_EQ(r.ops, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(r.inputs, (std::vector<int>{1, 3, 2}));  // in order of first use
  EXPECT_EQ(r.outputs, (std::vector<int>{6}));
  ASSERT_EQ(exe->steps.size(), 2u);
  EXPECT_EQ(exe->steps[0].kind, StepKind::kView);
  EXPECT_EQ(exe->steps[0].index, 0);
  EXPECT_EQ(exe->steps[1].kind, StepKind::kFused);
  EXPECT_EQ(exe->steps[1].index, 0);
  ASSERT_EQ(exe->slots.size(), 7u);
  for (int p = 0; p < 3; ++p) EXPECT_EQ(exe->slots[p].kind, SlotKind::kParam);
  EXPECT_EQ(exe->slots[3].kind, SlotKind::kView);
  EXPECT_EQ(exe->slots[4].kind, SlotKind::kInRegion);
  EXPECT_EQ(exe->slots[5].kind, SlotKind::kInRegion);
  EXPECT_EQ(exe->slots[6].kind, SlotKind::kTemp);
  EXPECT_EQ(exe->slots[6].offset, 0);
  EXPECT_EQ(exe->scratch_bytes, 64);  // 48 bytes rounded up to 64
  EXPECT_EQ(exe->name(), "fusion_test");
}

TEST(FusionTest, LayoutOpsAreViewsAndDotIsAKernel) {
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 3}));        // 0
  int w = b.Param(T(DType::kF32, {4, 3}));        // 1
  int wt = b.Transpose(w, {1, 0});                // op 0, value 2: view
  int d = b.DotGeneral(x, wt, {}, {}, {1}, {0}, DType::kF32);  // op 1, value 3: kernel
  int r = b.Reshape(d, {8});                      // op 2, value 4: view
  int sl = b.Slice(r, {0}, {8}, {2});             // op 3, value 5: view
  int e = b.Unary(OpCode::kExp, sl);              // op 4, value 6: region 0
  int n = b.Unary(OpCode::kNegate, e);            // op 5, value 7: region 0
  b.Result(n);
  b.Result(d);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->steps.size(), 5u);
  const StepKind kinds[] = {StepKind::kView, StepKind::kKernel, StepKind::kView, StepKind::kView,
                            StepKind::kFused};
  const int index[] = {0, 1, 2, 3, 0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(exe->steps[i].kind, kinds[i]) << i;
    EXPECT_EQ(exe->steps[i].index, index[i]) << i;
  }
  ASSERT_EQ(exe->regions.size(), 1u);
  EXPECT_EQ(exe->regions[0].ops, (std::vector<int>{4, 5}));
  EXPECT_EQ(exe->regions[0].inputs, (std::vector<int>{5}));
  EXPECT_EQ(exe->regions[0].outputs, (std::vector<int>{7}));
  EXPECT_EQ(exe->slots[2].kind, SlotKind::kView);
  EXPECT_EQ(exe->slots[3].kind, SlotKind::kTemp);  // dot output
  EXPECT_EQ(exe->slots[4].kind, SlotKind::kView);
  EXPECT_EQ(exe->slots[5].kind, SlotKind::kView);
  EXPECT_EQ(exe->slots[6].kind, SlotKind::kInRegion);
  EXPECT_EQ(exe->slots[7].kind, SlotKind::kTemp);
  // Temps get separate 64-byte aligned ranges: dot (32 bytes) then the region output (16 bytes).
  EXPECT_EQ(exe->slots[3].offset, 0);
  EXPECT_EQ(exe->slots[7].offset, 64);
  EXPECT_EQ(exe->scratch_bytes, 128);
}

TEST(FusionTest, RegionsSplitOnShapeChangeAndKernelUse) {
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 3}));     // 0
  int e = b.Unary(OpCode::kExp, x);            // op 0, value 1: region 0
  int s = b.Binary(OpCode::kAdd, e, x);        // op 1, value 2: region 0
  int zero = b.Constant(0, DType::kF32);       // op 2, value 3: kernel, runs before region 0
  int red = b.Reduce(s, zero, {1}, ReduceKind::kAdd);  // op 3, value 4: kernel
  int n = b.Unary(OpCode::kNegate, red);       // op 4, value 5: region 1 (shape [2])
  int bc = b.BroadcastInDim(n, {2, 3}, {0});   // op 5, value 6: view of region 1 -> closes it
  int m = b.Binary(OpCode::kMultiply, bc, e);  // op 6, value 7: region 2
  b.Result(m);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->regions.size(), 3u);
  EXPECT_EQ(exe->regions[0].ops, (std::vector<int>{0, 1}));
  EXPECT_EQ(exe->regions[0].inputs, (std::vector<int>{0}));
  EXPECT_EQ(exe->regions[0].outputs, (std::vector<int>{1, 2}));  // e is used by region 2 too
  EXPECT_EQ(exe->regions[1].shape, (Dims{2}));
  EXPECT_EQ(exe->regions[1].ops, (std::vector<int>{4}));
  EXPECT_EQ(exe->regions[1].inputs, (std::vector<int>{4}));
  EXPECT_EQ(exe->regions[1].outputs, (std::vector<int>{5}));
  EXPECT_EQ(exe->regions[2].ops, (std::vector<int>{6}));
  EXPECT_EQ(exe->regions[2].inputs, (std::vector<int>{6, 1}));
  EXPECT_EQ(exe->regions[2].outputs, (std::vector<int>{7}));
  ASSERT_EQ(exe->steps.size(), 6u);
  // The constant reads nothing, so it does not end region 0: it is scheduled before it.
  const StepKind kinds[] = {StepKind::kKernel, StepKind::kFused, StepKind::kKernel, StepKind::kFused,
                            StepKind::kView, StepKind::kFused};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(exe->steps[i].kind, kinds[i]) << i;
}

TEST(FusionTest, ConstantInsideAChainKeepsOneRegion) {
  Builder b;
  int x = b.Param(T(DType::kF32, {4}));
  int e = b.Unary(OpCode::kExp, x);
  int one = b.ScalarLike(1, e);  // constant + broadcast in the middle of the chain
  b.Result(b.Binary(OpCode::kAdd, e, one));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(exe->regions.size(), 1u);
  EXPECT_EQ(exe->regions[0].ops.size(), 2u);
}

TEST(FusionTest, LongChainsSplitAtTheRegisterBudget) {
  // 40 independent same-shaped updates (like a _foreach_ op): 3 slots each would overflow one
  // region; every region must fit the executor's register slots.
  Builder b;
  std::vector<int> xs;
  for (int i = 0; i < 40; ++i) xs.push_back(b.Param(T(DType::kF32, {8})));
  for (int i = 0; i < 40; ++i) b.Result(b.Binary(OpCode::kMultiply, xs[i], xs[(i + 1) % 40]));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_GT(exe->regions.size(), 1u);
  for (const auto& r : exe->regions)
    EXPECT_LE(static_cast<int>(r.ops.size() + r.inputs.size()), kMaxRegionValues);
}

TEST(FusionTest, InterleavedChainsOfTwoShapesAreOneRegionEach) {
  // A _foreach_ step records op by op across the parameters: a = x * 2 and c = y * 2, then
  // a + x and c + y. Each shape's chain is one region (Note [Open regions]).
  Builder b;
  int x = b.Param(T(DType::kF32, {4}));
  int y = b.Param(T(DType::kF32, {2, 3}));
  int a = b.Binary(OpCode::kMultiply, x, x);
  int c = b.Binary(OpCode::kMultiply, y, y);
  b.Result(b.Binary(OpCode::kAdd, a, x));
  b.Result(b.Binary(OpCode::kAdd, c, y));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->regions.size(), 2u);
  EXPECT_EQ(exe->regions[0].ops.size(), 2u);
  EXPECT_EQ(exe->regions[1].ops.size(), 2u);
}

TEST(FusionTest, LargeInterleavedChainsAreOneRegionPerChain) {
  // Note [Regions by chain]: a _foreach_ update over 12 large same-shaped parameters, recorded op
  // by op across them (p * s, then + g, then * p, then - g, each scalar a broadcast view), is
  // one region per parameter holding that parameter's whole chain -- not regions cut across the
  // parameters in recording order, whose values crossed to the next region through memory. Two
  // chains that meet (the last op adds two parameters' results) merge into one region; the same
  // update over small parameters shares regions across them as before.
  for (const int64_t n : {int64_t{8192}, int64_t{64}}) {
    SCOPED_TRACE(n);
    const int k = 12;
    Builder b;
    std::vector<int> p, g, v;
    for (int i = 0; i < k; ++i) p.push_back(b.Param(T(DType::kF32, {n})));
    for (int i = 0; i < k; ++i) g.push_back(b.Param(T(DType::kF32, {n})));
    int s = b.Param(T(DType::kF32, {}));
    for (int i = 0; i < k; ++i) v.push_back(b.Binary(OpCode::kMultiply, p[i], b.BroadcastInDim(s, {n}, {})));
    for (int i = 0; i < k; ++i) v[i] = b.Binary(OpCode::kAdd, v[i], g[i]);
    for (int i = 0; i < k; ++i) v[i] = b.Binary(OpCode::kMultiply, v[i], p[i]);
    for (int i = 0; i < k; ++i) v[i] = b.Binary(OpCode::kSubtract, v[i], b.BroadcastInDim(s, {n}, {}));
    for (int i = 0; i + 1 < k; ++i) b.Result(v[i]);
    b.Result(b.Binary(OpCode::kAdd, v[k - 1], v[k - 2]));
    auto exe = CompileOk(b);
    ASSERT_NE(exe, nullptr);
    if (n == 64) {
      EXPECT_LT(exe->regions.size(), static_cast<size_t>(k) / 2);
      continue;
    }
    ASSERT_EQ(exe->regions.size(), static_cast<size_t>(k - 1));
    const int np = exe->graph.num_params();
    for (const auto& r : exe->regions) {
      EXPECT_EQ(r.ops.size(), r.inputs.size() == 4 ? 4u : 9u);  // a chain, or the two that meet
      for (int in : r.inputs) {  // a region reads parameters and broadcasts, never another region
        const bool param = in < np;
        EXPECT_TRUE(param || exe->graph.ops[in - np].code == OpCode::kBroadcastInDim) << in;
      }
    }
  }
}

TEST(FusionTest, LargeOpsSharingAnInputShareARegion) {
  // a = x * 2 and b = x + 1 on a large x (Note [Regions by chain]): no chain joins them, but
  // they read the same input, so one pass reads x once; y * 2 reads nothing they read and runs
  // in a region of its own.
  Builder b;
  const Dims n{64, 128};
  int x = b.Param(T(DType::kF32, n));
  int y = b.Param(T(DType::kF32, n));
  b.Result(b.Binary(OpCode::kMultiply, x, b.ScalarLike(2.0, x)));
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(1.0, x)));
  b.Result(b.Binary(OpCode::kMultiply, y, b.ScalarLike(2.0, y)));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->regions.size(), 2u);
  EXPECT_EQ(exe->regions[0].ops.size(), 2u);
  EXPECT_EQ(exe->regions[1].ops.size(), 1u);
}

TEST(FusionTest, AKernelThatDoesNotReadARegionLeavesItOpen) {
  // e = exp(x); d = dot(w, w); f = e * x: the dot reads nothing of the region, so it runs first
  // and exp and multiply stay one pass.
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 2}));
  int w = b.Param(T(DType::kF32, {2, 2}));
  int e = b.Unary(OpCode::kExp, x);
  int d = b.DotGeneral(w, w, {}, {}, {1}, {0}, DType::kF32);
  b.Result(b.Binary(OpCode::kMultiply, e, x));
  b.Result(d);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->regions.size(), 1u);
  EXPECT_EQ(exe->regions[0].ops.size(), 2u);
  ASSERT_EQ(exe->steps.size(), 2u);
  EXPECT_EQ(exe->steps[0].kind, StepKind::kKernel);
  EXPECT_EQ(exe->steps[1].kind, StepKind::kFused);
}

TEST(FusionTest, AnOpReadingAnotherOpenRegionClosesItFirst) {
  // r = sum(exp(x)) over dim 1 is a kernel reading region A; then neg(r) (shape [2]) and
  // exp(x) * 2 (shape [2, 2]) in two regions, the first read through a broadcast by the second.
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 2}));
  int e = b.Unary(OpCode::kExp, x);                             // region 0
  int r = b.Reduce(e, b.Constant(0, DType::kF32), {1}, ReduceKind::kAdd);
  int n = b.Unary(OpCode::kNegate, r);                          // region 1, shape [2]
  int m = b.Binary(OpCode::kMultiply, e, e);                    // region 2, shape [2, 2]
  int bn = b.BroadcastInDim(n, {2, 2}, {0});                    // view: closes region 1
  b.Result(b.Binary(OpCode::kAdd, m, bn));                      // region 2
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->regions.size(), 3u);
  // Every step reads only what earlier steps wrote.
  std::vector<int> written(exe->graph.num_values(), 0);
  for (int p = 0; p < exe->graph.num_params(); ++p) written[p] = 1;
  const int np = exe->graph.num_params();
  for (const Step& st : exe->steps) {
    if (st.kind == StepKind::kFused) {
      for (int v : exe->regions[st.index].inputs) EXPECT_TRUE(written[v]) << v;
      for (int i : exe->regions[st.index].ops) written[np + i] = 1;
    } else {
      for (int o : exe->graph.ops[st.index].operands) EXPECT_TRUE(written[o]) << o;
      written[np + st.index] = 1;
    }
  }
}

TEST(FusionTest, DeadCodeIsRemovedBeforePlanning) {
  Builder b;
  int x = b.Param(T(DType::kF32, {5}));
  b.Unary(OpCode::kExp, x);  // dead
  b.Result(b.Unary(OpCode::kNegate, x));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->graph.ops.size(), 1u);
  EXPECT_EQ(exe->graph.ops[0].code, OpCode::kNegate);
  EXPECT_EQ(exe->graph.results, (std::vector<int>{1}));
  ASSERT_EQ(exe->regions.size(), 1u);
  EXPECT_EQ(exe->regions[0].ops, (std::vector<int>{0}));
}

TEST(FusionTest, TempsWhoseLivesDoNotOverlapShareScratch) {
  // d1 = x.x, d2 = d1.x, d3 = d2.x: d1 is dead once d2 exists, so d3 can take its memory.
  Builder b;
  int x = b.Param(T(DType::kF32, {16, 16}));
  auto mm = [&](int a, int c) { return b.DotGeneral(a, c, {}, {}, {1}, {0}, DType::kF32); };
  int d1 = mm(x, x);
  int d2 = mm(d1, x);
  int d3 = mm(d2, x);
  b.Result(b.Reduce(d3, b.Constant(0, DType::kF32), {0, 1}, ReduceKind::kAdd));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  const int64_t matrix = 16 * 16 * 4;
  EXPECT_EQ(exe->slots[d1].offset, exe->slots[d3].offset);
  EXPECT_NE(exe->slots[d1].offset, exe->slots[d2].offset);
  EXPECT_LE(exe->scratch_bytes, 2 * matrix + 64) << "temps that are never live together need not add up";
}

TEST(FusionTest, ResultsHaveTheirOwnScratchRange) {
  // Note [Result scratch]: d2 and the sum are results, d1 is not; the results' temps lie past
  // every other temp, so a launch that writes them directly takes only temp_bytes.
  Builder b;
  int x = b.Param(T(DType::kF32, {16, 16}));
  auto mm = [&](int a, int c) { return b.DotGeneral(a, c, {}, {}, {1}, {0}, DType::kF32); };
  int d1 = mm(x, x);
  int d2 = mm(d1, x);
  int sum = b.Reduce(d2, b.Constant(0, DType::kF32), {0, 1}, ReduceKind::kAdd);
  b.Result(d2);
  b.Result(sum);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(exe->temp_bytes, 16 * 16 * 4);
  EXPECT_GE(exe->slots[d2].offset, exe->temp_bytes);
  EXPECT_GE(exe->slots[sum].offset, exe->temp_bytes);
  EXPECT_EQ(exe->scratch_bytes, exe->temp_bytes + 16 * 16 * 4 + 64);
}

TEST(FusionTest, AViewKeepsItsBaseAlive) {
  // t's memory is read through its transpose after u is computed: u must not overwrite it.
  Builder b;
  int x = b.Param(T(DType::kF32, {8, 8}));
  auto mm = [&](int a, int c) { return b.DotGeneral(a, c, {}, {}, {1}, {0}, DType::kF32); };
  int t = mm(x, x);
  int tt = b.Transpose(t, {1, 0});
  int u = mm(x, x);
  b.Result(mm(tt, u));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_NE(exe->slots[t].offset, exe->slots[u].offset);
}

TEST(FusionTest, APlanSurvivesItsPersistentFormat) {
  // Regions with values kept in registers, views, kernels and temps: written and read back, the
  // plan is the same (and runs the same: the other tests run plans straight from the planner).
  Builder b;
  int x = b.Param(T(DType::kF32, {4, 3}));
  int w = b.Param(T(DType::kF32, {3, 5}));
  int e = b.Unary(OpCode::kExp, b.Binary(OpCode::kMultiply, x, x));
  int d = b.DotGeneral(e, w, {}, {}, {1}, {0}, DType::kF32);
  int t = b.Transpose(d, {1, 0});
  b.Result(b.Reduce(b.Unary(OpCode::kTanh, t), b.Constant(0, DType::kF32), {0}, ReduceKind::kAdd));
  b.Result(e);
  auto g = b.Finish();
  ASSERT_TRUE(g.ok());
  CompileOptions options;
  options.name = "roundtrip";
  auto exe = CompileForHost(g.value(), options);
  ASSERT_TRUE(exe.ok());
  std::string bytes = SerializePlan(*exe.value());
  auto back = DeserializePlan(bytes, g.value(), options);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const HostExecutable &a = *exe.value(), &c = *back.value();
  EXPECT_TRUE(StructurallyEqual(a.graph, c.graph));
  ASSERT_EQ(a.steps.size(), c.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].kind, c.steps[i].kind);
    EXPECT_EQ(a.steps[i].index, c.steps[i].index);
  }
  ASSERT_EQ(a.regions.size(), c.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) {
    EXPECT_EQ(a.regions[i].ops, c.regions[i].ops);
    EXPECT_EQ(a.regions[i].output_slots, c.regions[i].output_slots);
  }
  EXPECT_EQ(a.producer_step, c.producer_step);
  EXPECT_EQ(a.scratch_bytes, c.scratch_bytes);
  EXPECT_EQ(a.work(), c.work());
  EXPECT_EQ(SerializePlan(c), bytes);
  // Damage anywhere is read safely (the sanitizer stage runs this under ASan): a plan is refused
  // unless every index and offset it holds is in range. (Whether a plan that passes is the one
  // written is the cache entry's checksum's job.) A truncated plan is always refused.
  int refused = 0;
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    refused += !DeserializePlan(bad, g.value(), options).ok();
  }
  EXPECT_GT(refused, 0);
  for (size_t cut = 0; cut < bytes.size(); cut += 11) EXPECT_FALSE(DeserializePlan(bytes.substr(0, cut), g.value(), options).ok());
}

TEST(FusionTest, SoftmaxChainsBecomeOneRowStep) {
  for (bool log : {false, true}) {
    Builder b;
    int x = b.Param(T(DType::kF32, {4, 6, 5}));
    int ex = b.Unary(OpCode::kExp, x);          // an open region the row step reads: closed first
    int y = SoftmaxChain(b, ex, 1, log);
    b.Result(b.Unary(OpCode::kNegate, y));
    auto g = b.Finish();
    ASSERT_TRUE(g.ok());
    CompileOptions options;
    auto compiled = CompileForHost(g.value(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    auto exe = compiled.value();
    ASSERT_EQ(exe->rows.size(), 1u);
    const RowStep& r = exe->rows[0];
    EXPECT_EQ(r.kind, log ? RowKind::kLogSoftmax : RowKind::kSoftmax);
    EXPECT_EQ(r.x, ex);
    EXPECT_EQ(r.dim, 1);
    ASSERT_EQ(exe->steps.size(), 3u);
    EXPECT_EQ(exe->steps[0].kind, StepKind::kFused);
    EXPECT_EQ(exe->steps[1].kind, StepKind::kRows);
    EXPECT_EQ(exe->steps[2].kind, StepKind::kFused);
    EXPECT_EQ(exe->producer_step[r.out], 1);
    // The chain's intermediates (and its init constants) take no memory and run nowhere.
    for (int op : r.ops) {
      if (x + 1 + op != r.out) {
        EXPECT_EQ(exe->slots[x + 1 + op].kind, SlotKind::kInRegion) << op;
      }
    }
    EXPECT_EQ(exe->slots[r.out].kind, SlotKind::kTemp);
    // Its persistent form matches the rows again.
    std::string bytes = SerializePlan(*exe);
    auto back = DeserializePlan(bytes, g.value(), options);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back.value()->rows, exe->rows);
  }
}

TEST(FusionTest, ANarrowSoftmaxReadsAndRoundsInTheRowStep) {
  // bfloat16 in, float32 compute, bfloat16 out: the converts join the row step (no f32 temps).
  Builder b;
  int x = b.Param(T(DType::kBF16, {8, 32}));
  int y = SoftmaxChain(b, b.Convert(x, DType::kF32), 1, false);
  int out = b.Convert(y, DType::kBF16);
  b.Result(out);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->rows.size(), 1u);
  EXPECT_EQ(exe->rows[0].x, x);
  EXPECT_EQ(exe->rows[0].out, out);
  ASSERT_EQ(exe->steps.size(), 1u);
  EXPECT_EQ(exe->steps[0].kind, StepKind::kRows);
  EXPECT_EQ(exe->scratch_bytes, 8 * 32 * 2);  // only the bf16 result has a slot: no f32 temps
}

TEST(FusionTest, ALayerNormChainIsOneRowStepWritingItsStatistics) {
  // norm.cc's chain for a bf16 input: the converts join the step; the mean and rstd it writes are
  // read by reshapes after it; eps is an argument the kernel reads when it runs.
  Builder b;
  int x = b.Param(T(DType::kBF16, {8, 32}));
  int eps = b.Param(T(DType::kF32, {}));
  int xf = b.Convert(x, DType::kF32);
  auto group_mean = [&](int v) {
    int sum = b.Reduce(v, b.Constant(0.0, DType::kF32), {1}, ReduceKind::kAdd);
    return b.Binary(OpCode::kDivide, sum, b.ScalarLike(32.0, sum));
  };
  int mu = group_mean(xf);
  int xc = b.Binary(OpCode::kSubtract, xf, b.BroadcastInDim(mu, {8, 32}, {0}));
  int r = b.Unary(OpCode::kRsqrt, b.Binary(OpCode::kAdd, group_mean(b.Binary(OpCode::kMultiply, xc, xc)),
                                           b.BroadcastTo(eps, {8})));
  int y = b.Convert(b.Binary(OpCode::kMultiply, xc, b.BroadcastInDim(r, {8, 32}, {0})), DType::kBF16);
  b.Result(y);
  b.Result(b.Reshape(mu, {8, 1}));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  ASSERT_EQ(exe->rows.size(), 1u);
  const RowStep& row = exe->rows[0];
  EXPECT_EQ(row.kind, RowKind::kLayerNorm);
  EXPECT_EQ(row.x, x);
  EXPECT_EQ(row.out, y);
  EXPECT_EQ(row.eps, eps);
  EXPECT_EQ(row.mean, mu);
  EXPECT_EQ(row.rstd, -1);  // nothing outside reads it
  EXPECT_EQ(row.weight, -1);
  ASSERT_EQ(exe->steps.size(), 2u);
  EXPECT_EQ(exe->steps[0].kind, StepKind::kRows);
  EXPECT_EQ(exe->steps[1].kind, StepKind::kView);
  EXPECT_EQ(exe->slots[mu].kind, SlotKind::kTemp);
  EXPECT_EQ(exe->slots[r].kind, SlotKind::kInRegion);
}

TEST(FusionTest, SoftmaxBackwardChainsAreOneRowStep) {
  for (bool log : {false, true}) {
    Builder b;
    int g = b.Param(T(DType::kF32, {6, 10}));
    int y = b.Param(T(DType::kF32, {6, 10}));
    int sum = b.Reduce(log ? g : b.Binary(OpCode::kMultiply, g, y), b.Constant(0.0, DType::kF32), {1}, ReduceKind::kAdd);
    int s = b.BroadcastInDim(sum, {6, 10}, {0});
    int dx = log ? b.Binary(OpCode::kSubtract, g, b.Binary(OpCode::kMultiply, b.Unary(OpCode::kExp, y), s))
                 : b.Binary(OpCode::kMultiply, y, b.Binary(OpCode::kSubtract, g, s));
    b.Result(dx);
    auto exe = CompileOk(b);
    ASSERT_NE(exe, nullptr);
    ASSERT_EQ(exe->rows.size(), 1u);
    EXPECT_EQ(exe->rows[0].kind, log ? RowKind::kLogSoftmaxBackward : RowKind::kSoftmaxBackward);
    EXPECT_EQ(exe->rows[0].x, g);
    EXPECT_EQ(exe->rows[0].y, y);
    EXPECT_EQ(exe->rows[0].out, dx);
    ASSERT_EQ(exe->steps.size(), 1u);
    EXPECT_EQ(exe->steps[0].kind, StepKind::kRows);
  }
}

TEST(FusionTest, ARowChainWhoseIntermediateIsUsedElsewhereStaysAChain) {
  // The shifted values are also a result: the kernel would not produce them, so no row step.
  Builder b;
  int x = b.Param(T(DType::kF32, {3, 8}));
  int s;
  b.Result(SoftmaxChain(b, x, 1, false, &s));
  b.Result(s);
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_TRUE(exe->rows.empty());
  // Integer and float64 rows are not the kernel's either.
  for (DType t : {DType::kF64}) {
    Builder b2;
    b2.Result(SoftmaxChain(b2, b2.Param(T(t, {3, 8})), 1, true));
    auto exe2 = CompileOk(b2);
    ASSERT_NE(exe2, nullptr);
    EXPECT_TRUE(exe2->rows.empty());
  }
  // A chain computed in bfloat16 rounds after every op: the kernel would not.
  Builder b4;
  b4.Result(SoftmaxChain(b4, b4.Param(T(DType::kBF16, {3, 8})), 1, false));
  auto exe4 = CompileOk(b4);
  ASSERT_NE(exe4, nullptr);
  EXPECT_TRUE(exe4->rows.empty());
  // A sum over another dim than the max's is no softmax.
  Builder b3;
  int x3 = b3.Param(T(DType::kF32, {4, 4}));
  int m = b3.Reduce(x3, b3.Constant(-INFINITY, DType::kF32), {1}, ReduceKind::kMax);
  int e = b3.Unary(OpCode::kExp, b3.Binary(OpCode::kSubtract, x3, b3.BroadcastInDim(m, {4, 4}, {0})));
  int z = b3.Reduce(e, b3.Constant(0.0, DType::kF32), {0}, ReduceKind::kAdd);
  b3.Result(b3.Binary(OpCode::kDivide, e, b3.BroadcastInDim(z, {4, 4}, {1})));
  auto exe3 = CompileOk(b3);
  ASSERT_NE(exe3, nullptr);
  EXPECT_TRUE(exe3->rows.empty());
}

TEST(FusionTest, AnIotaTempHoldsOneRun) {
  // Note [Compact iota]: 1000 i64 values, not 1000x1000.
  Builder b;
  int io = b.Iota(T(DType::kI64, {1000, 1000}), 1);
  b.Result(b.Reduce(io, b.Constant(0, DType::kI64), {0}, ReduceKind::kAdd));
  auto exe = CompileOk(b);
  ASSERT_NE(exe, nullptr);
  EXPECT_LE(exe->scratch_bytes, 2 * 8000 + 128);
}

TEST(FusionTest, CompileRejectsInvalidGraphs) {
  Graph g;
  g.params = {T(DType::kF32, {2})};
  g.ops.push_back(Op{OpCode::kAdd, {0}, T(DType::kF32, {2}), {}});
  g.results = {1};
  auto exe = CompileForHost(g, CompileOptions{});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), Code::kInternal);
  EXPECT_NE(exe.status().message().find("expects 2 operands"), std::string::npos);
}

}  // namespace
}  // namespace tpu::host
