#include "runtime/host/host_allocator.h"
#include "runtime/host/view.h"

#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "runtime/buffer.h"

namespace tpu::host {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

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
  EXPECT_EQ(HostAllocator::RoundSize(1000), 1024);  // 512-byte granules below 1 MiB
  EXPECT_EQ(HostAllocator::RoundSize(0), 64);
  EXPECT_EQ(HostAllocator::RoundSize(kMiB + 1), 2 * kMiB);  // 1 MiB granules above
  for (Buffer* b : {small, zero, big}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->contents()) % 64, 0u);
    EXPECT_EQ(b->device(), 0);
  }
  std::memset(big->contents(), 0xAB, big->nbytes());  // the memory is really there
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated, 1024 + 64 + 2 * kMiB);
  EXPECT_EQ(s.reserved, s.allocated);
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.capacity, 64 * kMiB);
  small->Release();
  zero->Release();
  big->Release();
  s = a.stats();
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.num_frees, 3);
  EXPECT_EQ(s.peak_allocated, 1024 + 64 + 2 * kMiB);
}

TEST(AllocatorTest, CapacityIsEnforced) {
  HostAllocator a(3, 4 * kMiB);
  Buffer* b1 = AllocOk(a, 3 * kMiB);
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
  Buffer* b3 = AllocOk(a, 4 * kMiB);
  ASSERT_NE(b3, nullptr);
  b3->Release();
}

TEST(AllocatorTest, FreedBlocksAreReused) {
  HostAllocator a(0, 16 * kMiB);
  Buffer* b = AllocOk(a, 5000);
  void* p = b->contents();
  b->Release();
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.reserved, 5120);  // kept in the cache
  Buffer* again = AllocOk(a, 4700);  // same rounded size
  EXPECT_EQ(again->contents(), p);
  EXPECT_EQ(a.stats().reserved, 5120);
  Buffer* other = AllocOk(a, 6000);  // a different size is a new block
  EXPECT_NE(other->contents(), p);
  EXPECT_EQ(a.stats().reserved, 5120 + 6144);
  again->Release();
  other->Release();
  a.EmptyCache();
  s = a.stats();
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.peak_reserved, 5120 + 6144);
}

TEST(AllocatorTest, CacheIsEmptiedBeforeReportingOom) {
  HostAllocator a(0, 4 * kMiB);
  Buffer* b = AllocOk(a, 3 * kMiB);
  b->Release();  // 3 MiB stays reserved in the cache
  EXPECT_EQ(a.stats().reserved, 3 * kMiB);
  Buffer* c = AllocOk(a, 2 * kMiB);  // needs the cache returned to the budget first
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a.stats().reserved, 2 * kMiB);
  EXPECT_EQ(a.stats().num_ooms, 0);
  c->Release();
}

TEST(AllocatorTest, ResetPeakAndAccumulated) {
  HostAllocator a(0, 16 * kMiB);
  Buffer* b = AllocOk(a, 2 * kMiB);
  Buffer* c = AllocOk(a, kMiB);
  c->Release();
  EXPECT_EQ(a.stats().peak_allocated, 3 * kMiB);
  a.ResetPeak();
  EXPECT_EQ(a.stats().peak_allocated, 2 * kMiB);
  EXPECT_EQ(a.stats().peak_reserved, 3 * kMiB);  // the cached 1 MiB is still reserved
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
