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

// Philox4x32-10 of one counter, written out here from its definition (Salmon et al., SC'11):
// the reference for the threaded draw below.
std::vector<uint32_t> PhiloxBlock(uint64_t seed, uint64_t offset, uint64_t block) {
  uint32_t c[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(offset),
                   static_cast<uint32_t>(offset >> 32)};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t{0xD2511F53} * c[0], p1 = uint64_t{0xCD9E8D57} * c[2];
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0, c[1] = static_cast<uint32_t>(p1), c[2] = n2, c[3] = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9, k1 += 0xBB67AE85;
  }
  return {c[0], c[1], c[2], c[3]};
}

TEST(RngTest, ThreadedDrawIsBitIdentical) {
  const int64_t n = 200003;  // large enough to be filled by the pool; not a multiple of 4
  std::vector<uint32_t> big = RngBits(99, 5, n);
  for (int64_t i = 0; i < n; i += 4) {
    std::vector<uint32_t> want = PhiloxBlock(99, 5, static_cast<uint64_t>(i / 4));
    for (int64_t j = 0; j < 4 && i + j < n; ++j) ASSERT_EQ(big[i + j], want[j]) << i + j;
  }
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
