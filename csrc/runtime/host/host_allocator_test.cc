#include "runtime/host/host_allocator.h"
#include "runtime/host/view.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>
#include <string>

#include <gtest/gtest.h>

#include "runtime/buffer.h"

namespace tpu::host {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// This process's resident memory (VmRSS).
int64_t ResidentBytes() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

Buffer* AllocOk(HostAllocator& a, int64_t n) {
  StatusOr<Buffer*> b = a.Allocate(n);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? b.value() : nullptr;
}

TEST(AllocatorTest, RoundsAndAligns) {
  HostAllocator a(0, 64 * kMiB);
  Buffer* small = AllocOk(a, 1000);
  Buffer* zero = AllocOk(a, 0);
  Buffer* big = AllocOk(a, kMiB + 1);
  ASSERT_TRUE(small && zero && big);
  EXPECT_EQ(small->nbytes(), 1000);  // what was asked for; the block is rounded
  EXPECT_EQ(HostAllocator::RoundSize(1000), 1024);  // 512-byte granules
  EXPECT_EQ(HostAllocator::RoundSize(0), 512);
  EXPECT_EQ(HostAllocator::RoundSize(kMiB + 1), kMiB + 512);
  for (Buffer* b : {small, zero, big}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->contents()) % 64, 0u);
    EXPECT_EQ(b->device(), 0);
  }
  std::memset(big->contents(), 0xAB, big->nbytes());  // the memory is really there
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated, 1024 + 512 + kMiB + 512);
  EXPECT_EQ(s.reserved, 2 * kMiB + 20 * kMiB);  // one small and one 20 MiB segment
  EXPECT_EQ(a.num_segments(), 2);
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.capacity, 64 * kMiB);
  small->Release();
  zero->Release();
  big->Release();
  s = a.stats();
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.num_frees, 3);
  EXPECT_EQ(s.peak_allocated, 1024 + 512 + kMiB + 512);
  EXPECT_EQ(a.num_free_blocks(), 2);  // the freed blocks merged back into whole segments
}

TEST(AllocatorTest, CapacityIsEnforced) {
  HostAllocator a(3, 4 * kMiB);
  Buffer* b1 = AllocOk(a, 3 * kMiB);  // a 20 MiB segment does not fit: one of its own size
  ASSERT_NE(b1, nullptr);
  StatusOr<Buffer*> over = a.Allocate(2 * kMiB);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  const std::string& msg = over.status().message();
  EXPECT_NE(msg.find("tpu:3 out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tried to allocate 2.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3.00 MiB in use"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4.00 MiB device capacity"), std::string::npos) << msg;
  EXPECT_EQ(a.stats().num_ooms, 1);
  EXPECT_EQ(a.stats().allocated, 3 * kMiB);
  // What fits still succeeds, and the allocator stays usable after the failure.
  Buffer* b2 = AllocOk(a, kMiB);
  ASSERT_NE(b2, nullptr);
  EXPECT_FALSE(a.Allocate(1).ok());
  EXPECT_EQ(a.stats().num_ooms, 2);
  b1->Release();
  b2->Release();
  Buffer* b3 = AllocOk(a, 4 * kMiB);  // the cached segments go back to make room
  ASSERT_NE(b3, nullptr);
  EXPECT_EQ(a.stats().reserved, 4 * kMiB);
  b3->Release();
}

TEST(AllocatorTest, FreedBlocksServeOtherSizes) {
  HostAllocator a(0, 16 * kMiB);
  Buffer* b = AllocOk(a, 5000);
  char* p = static_cast<char*>(b->contents());
  b->Release();
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.reserved, 2 * kMiB);  // kept in the cache
  Buffer* again = AllocOk(a, 4700);  // the best fit: the start of the same free segment
  EXPECT_EQ(again->contents(), p);
  Buffer* other = AllocOk(a, 6000);  // a different size: split from the same segment
  EXPECT_EQ(other->contents(), p + HostAllocator::RoundSize(4700));
  EXPECT_EQ(a.stats().reserved, 2 * kMiB);
  again->Release();
  other->Release();
  EXPECT_EQ(a.num_free_blocks(), 1);  // merged back: one free block, the whole segment
  a.EmptyCache();
  s = a.stats();
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.peak_reserved, 2 * kMiB);
  EXPECT_EQ(a.num_segments(), 0);
}

TEST(AllocatorTest, ChangingShapesSettleOnOneWorkingSet) {
  // A training loop over 32 sequence lengths, each step holding 4 activations at once: what it
  // reserves is set by its largest step, not by the number of shapes (exact-size caching kept a
  // set of blocks per length: here 32 x 4 segments).
  HostAllocator a(0, int64_t{4} << 30);
  auto step = [&](int64_t len) {
    std::vector<Buffer*> live;
    for (int i = 0; i < 4; ++i) live.push_back(AllocOk(a, len * kMiB + i * 4096));
    for (Buffer* b : live) b->Release();
  };
  int64_t largest_step = 0;
  for (int i = 0; i < 4; ++i) largest_step += HostAllocator::RoundSize(41 * kMiB + i * 4096);
  const int64_t slack = 4 * 2 * kMiB;  // segments are rounded to 2 MiB
  for (int round = 0; round < 3; ++round)
    for (int64_t len = 10; len < 10 + 32; ++len) step(len);
  EXPECT_EQ(a.stats().allocated, 0);
  EXPECT_LE(a.stats().reserved, largest_step + slack) << "reserved " << a.stats().reserved;
  EXPECT_LE(a.stats().peak_reserved, largest_step + slack) << "peak " << a.stats().peak_reserved;
  // Descending and scattered orders reuse what is there: no new segment.
  int64_t segments = a.num_segments();
  for (int64_t len = 41; len >= 10; --len) step(len);
  for (int64_t k = 0; k < 64; ++k) step(10 + (k * 17) % 32);
  EXPECT_EQ(a.num_segments(), segments);
  EXPECT_LE(a.stats().peak_reserved, largest_step + slack);
  a.EmptyCache();
  EXPECT_EQ(a.stats().reserved, 0);
}

TEST(AllocatorTest, EmptyCacheReturnsMemoryToTheSystem) {
  HostAllocator a(0, int64_t{4} << 30);
  int64_t before = ResidentBytes();
  Buffer* b = AllocOk(a, 256 * kMiB);
  std::memset(b->contents(), 1, b->nbytes());  // touched: resident
  EXPECT_GE(ResidentBytes() - before, 200 * kMiB);
  b->Release();
  EXPECT_GE(ResidentBytes() - before, 200 * kMiB);  // cached
  a.EmptyCache();
  EXPECT_LT(ResidentBytes() - before, 32 * kMiB);
}

TEST(AllocatorTest, CacheIsEmptiedBeforeReportingOom) {
  HostAllocator a(0, 4 * kMiB);
  Buffer* b = AllocOk(a, 3 * kMiB);
  b->Release();  // 3 MiB stays reserved in the cache
  EXPECT_EQ(a.stats().reserved, 3 * kMiB);
  Buffer* c = AllocOk(a, 2 * kMiB);  // fits in the cached block: no new memory
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a.stats().reserved, 3 * kMiB);
  // c holds the whole block (a rest of 1 MiB is not worth a block of its own), and a new segment
  // does not fit beside it: fragmentation, as on a GPU.
  EXPECT_EQ(a.Allocate(2 * kMiB).status().code(), Code::kResourceExhausted);
  c->Release();
  Buffer* d = AllocOk(a, 4 * kMiB);  // the cache goes back to the budget first
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(a.stats().reserved, 4 * kMiB);
  d->Release();
}

TEST(AllocatorTest, ResetPeakAndAccumulated) {
  HostAllocator a(0, 16 * kMiB);
  Buffer* b = AllocOk(a, 2 * kMiB);
  Buffer* c = AllocOk(a, kMiB);
  c->Release();
  EXPECT_EQ(a.stats().peak_allocated, 3 * kMiB);
  a.ResetPeak();
  EXPECT_EQ(a.stats().peak_allocated, 2 * kMiB);
  EXPECT_EQ(a.stats().peak_reserved, 4 * kMiB);  // the cached small segment is still reserved
  a.ResetAccumulated();
  MemoryStats s = a.stats();
  EXPECT_EQ(s.num_allocs, 0);
  EXPECT_EQ(s.num_frees, 0);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.allocated, 2 * kMiB);
  b->Release();
}

TEST(BufferTest, BindingRetainsItsBuffer) {
  HostAllocator a(0, 16 * kMiB);
  Buffer* b = AllocOk(a, 64);
  {
    Binding bind(b, 0, DType::kF32, {4, 4});
    b->Release();  // the binding's reference keeps it alive
    EXPECT_EQ(a.stats().allocated, 512);
    Binding moved = std::move(bind);
    EXPECT_EQ(bind.buffer(), nullptr);
    EXPECT_EQ(moved.buffer(), b);
    EXPECT_EQ(moved.strides(), (Dims{4, 1}));
    EXPECT_TRUE(moved.CoversBuffer());
    EXPECT_EQ(HostView(moved).data, b->contents());
    EXPECT_EQ(a.stats().allocated, 512);
  }
  EXPECT_EQ(a.stats().allocated, 0);
  EXPECT_EQ(a.stats().num_frees, 1);
}

TEST(BufferTest, LazyBuffersTakeMemoryWhenMaterialized) {
  HostAllocator a(0, 16 * kMiB);
  StatusOr<Buffer*> lazy = a.Allocate(4000, /*materialize=*/false);
  ASSERT_TRUE(lazy.ok());
  Buffer* b = lazy.value();
  EXPECT_FALSE(b->materialized());
  EXPECT_EQ(a.stats().allocated, 0);
  ASSERT_TRUE(a.Materialize(b).ok());
  EXPECT_TRUE(b->materialized());
  EXPECT_EQ(a.stats().allocated, 4096);
  ASSERT_TRUE(a.Materialize(b).ok());  // idempotent
  EXPECT_EQ(a.stats().allocated, 4096);
  b->Release();
  EXPECT_EQ(a.stats().allocated, 0);
  // A buffer that never took memory frees nothing.
  Buffer* never = a.Allocate(100, false).value();
  never->Release();
  EXPECT_EQ(a.stats().num_frees, 1);
}

TEST(BufferTest, ScalarBindingKeepsItsBytesInline) {
  double x = 2.5;
  Binding s = Binding::Scalar(DType::kF64, &x);
  EXPECT_EQ(s.buffer(), nullptr);
  EXPECT_TRUE(s.is_inline());
  EXPECT_EQ(s.dtype(), DType::kF64);
  EXPECT_TRUE(s.dims().empty());
  EXPECT_EQ(*static_cast<const double*>(HostView(s).data), 2.5);
  Binding moved = std::move(s);  // the view must follow the inline bytes
  EXPECT_EQ(*static_cast<const double*>(HostView(moved).data), 2.5);
  int32_t i = -3;
  Binding t = Binding::Scalar(DType::kI32, &i);
  moved = std::move(t);
  EXPECT_EQ(moved.dtype(), DType::kI32);
  EXPECT_EQ(*static_cast<const int32_t*>(HostView(moved).data), -3);
  uint64_t pair[2] = {7, 9};  // a two-word state fits inline too
  Binding st = Binding::Scalar(DType::kU64, pair, {2});
  const auto* w = static_cast<const uint64_t*>(HostView(st).data);
  EXPECT_EQ(w[0], 7u);
  EXPECT_EQ(w[1], 9u);
}

TEST(BufferTest, ViewHelpers) {
  EXPECT_EQ(ContiguousStrides({2, 3, 4}), (Dims{12, 4, 1}));
  EXPECT_EQ(ContiguousStrides({}), (Dims{}));
  View v{nullptr, DType::kF32, {2, 3}, {3, 1}};
  EXPECT_TRUE(v.IsContiguous());
  EXPECT_EQ(v.NumElements(), 6);
  View t{nullptr, DType::kF32, {3, 2}, {1, 3}};
  EXPECT_FALSE(t.IsContiguous());
  View ones{nullptr, DType::kF32, {1, 3, 1}, {99, 1, 7}};  // size-1 dims may have any stride
  EXPECT_TRUE(ones.IsContiguous());
  View bcast{nullptr, DType::kF32, {2, 3}, {0, 1}};
  EXPECT_FALSE(bcast.IsContiguous());
}

}  // namespace
}  // namespace tpu::host
