// rng_bit_generator (Philox4x32-10 over {seed, offset}) through the host executor.
#include <cstdint>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

std::vector<uint32_t> RngBits(uint64_t seed, uint64_t offset, int64_t n) {
  Builder b;
  int st = b.Param(T(DType::kU64, {2}));
  b.Result(b.RngBits(st, {n}));
  std::vector<uint64_t> state = {seed, offset};
  std::vector<uint32_t> out(n);
  Status s = RunProgram(b, Bindings(Bind(state, DType::kU64, {2})), Bindings(Bind(out, DType::kU32, {n})));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(RngTest, DeterministicPerSeedAndOffset) {
  std::vector<uint32_t> a = RngBits(42, 7, 1001), again = RngBits(42, 7, 1001);
  EXPECT_EQ(a, again);
  std::vector<uint32_t> other_offset = RngBits(42, 8, 1001), other_seed = RngBits(43, 7, 1001);
  int same_offset = 0, same_seed = 0;
  for (int i = 0; i < 1001; ++i) {
    same_offset += a[i] == other_offset[i];
    same_seed += a[i] == other_seed[i];
  }
  EXPECT_LE(same_offset, 2);
  EXPECT_LE(same_seed, 2);
  // A prefix of a longer draw is the shorter draw (element i depends on (seed, offset, i) only).
  std::vector<uint32_t> shorter = RngBits(42, 7, 7);
  EXPECT_EQ(shorter, std::vector<uint32_t>(a.begin(), a.begin() + 7));
  // Mostly distinct values.
  EXPECT_GE(std::set<uint32_t>(a.begin(), a.end()).size(), 995u);
}

TEST(RngTest, Philox4x32KnownAnswer) {
  // Random123's known-answer vector for philox4x32-10: counter 0, key 0.
  EXPECT_EQ(RngBits(0, 0, 4), (std::vector<uint32_t>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(RngTest, BitsMakeUniformFloats) {
  // u = bits / 2^32 through convert(ui32 -> f64): in [0, 1) with mean near 1/2.
  const int64_t n = 4096;
  Builder b;
  int st = b.Param(T(DType::kU64, {2}));
  int f = b.Convert(b.RngBits(st, {n}), DType::kF64);
  b.Result(b.Binary(OpCode::kMultiply, f, b.ScalarLike(1.0 / 4294967296.0, f)));
  std::vector<uint64_t> state = {1234, 0};
  std::vector<double> u(n);
  ASSERT_TRUE(RunProgram(b, Bindings(Bind(state, DType::kU64, {2})), Bindings(Bind(u, DType::kF64, {n}))).ok());
  double sum = 0;
  int upper = 0;
  for (double v : u) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    sum += v;
    upper += v >= 0.5;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.03);
  EXPECT_NEAR(upper, n / 2, 200);
}

}  // namespace
}  // namespace tpu::host::testing
