// Note [Stream-ordered frees]: the host allocator reuses a freed buffer's memory while tasks
// queued on its device still use it, for work queued after them.
#include <atomic>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/host/host_allocator.h"
#include "runtime/worker_queue.h"

namespace tpu::host {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Launches: results[0]'s first byte = params[0]'s first byte + 1, checked against what the
// buffers' memory held when the launch was queued (so a block reused too early shows). Runs
// wait for `gate`.
class GatedExecutor final : public Executor {
 public:
  Status Run(const Launch& launch, RunReport*) override {
    while (!gate.load(std::memory_order_acquire)) std::this_thread::yield();
    auto* in = static_cast<unsigned char*>(launch.params[0].buffer()->contents());
    auto* out = static_cast<unsigned char*>(launch.results[0].buffer()->contents());
    *out = static_cast<unsigned char>(*in + 1);
    ++runs;
    return Status::Ok();
  }
  Status Write(Buffer* dst, int64_t offset, const void* src, int64_t n) override {
    std::memcpy(static_cast<char*>(dst->contents()) + offset, src, static_cast<size_t>(n));
    return Status::Ok();
  }
  Status Read(Buffer* src, int64_t offset, int64_t n, void* dst) override {
    std::memcpy(dst, static_cast<char*>(src->contents()) + offset, static_cast<size_t>(n));
    return Status::Ok();
  }
  Status Copy(Buffer*, int64_t, Buffer*, int64_t, int64_t) override { return Internal("no copies"); }
  std::atomic<bool> gate{false};
  std::atomic<int> runs{0};
};

class StreamOrderedFreeTest : public ::testing::Test {
 protected:
  StreamOrderedFreeTest() { alloc.SetQueue(&q); }
  ~StreamOrderedFreeTest() override {
    ex.gate = true;
    q.Drain();
    alloc.SetQueue(nullptr);
  }
  Buffer* New(int64_t n) { return alloc.Allocate(n).value(); }
  uint64_t Add1(Buffer* in, Buffer* out) {
    Binding p[] = {Binding(in, 0, DType::kU8, {1})};
    Binding r[] = {Binding(out, 0, DType::kU8, {1})};
    return q.Launch(exe, p, 1, r, 1, TaskContext("add1"), false);
  }
  HostAllocator alloc{0, 256 * kMiB};
  GatedExecutor ex;
  WorkerQueue q{0, &ex};
  ExecutablePtr exe = std::make_shared<Executable>();
};

TEST_F(StreamOrderedFreeTest, FreedMemoryServesLaterWorkBeforeTheQueueRuns) {
  Buffer* x = New(4 * kMiB);
  Buffer* y = New(4 * kMiB);
  unsigned char one = 1;
  q.Write(x, 0, &one, 1, TaskContext("write"));  // idle: runs now
  uint64_t use = Add1(x, y);                      // waits for the gate
  void* x_memory = x->contents();
  x->Release();  // the task still reads x: its memory goes back, ordered after it
  EXPECT_EQ(alloc.stats().allocated, HostAllocator::RoundSize(4 * kMiB));
  // Scratch is used by a running task at once: never a block queued work may still use.
  void* scratch = alloc.TakeScratch(4 * kMiB).value();
  EXPECT_NE(scratch, x_memory);
  alloc.ReturnScratch(scratch, 4 * kMiB);
  int64_t reserved = alloc.stats().reserved;
  Buffer* z = New(4 * kMiB);  // takes x's block, without waiting
  EXPECT_EQ(z->contents(), x_memory);
  EXPECT_EQ(alloc.stats().reserved, reserved);
  EXPECT_GE(z->last_use(), use);  // a host read of it waits for x's last task
  EXPECT_FALSE(q.Done(use));
  ex.gate = true;
  ASSERT_TRUE(q.Synchronize().ok());
  unsigned char got = 0;
  ASSERT_TRUE(q.Read(y, 0, 1, &got).ok());
  EXPECT_EQ(got, 2);  // the task read x's value, not z's
  y->Release();
  z->Release();
}

// A loop that frees what it made without ever syncing keeps the working set, not every queued
// task's buffers (before: ~4096 tasks' worth, held until the queue reclaimed them).
TEST_F(StreamOrderedFreeTest, ANoSyncLoopKeepsItsWorkingSet) {
  alloc.ResetPeak();
  for (int i = 0; i < 300; ++i) {
    Buffer* in = New(kMiB);
    Buffer* out = New(kMiB);
    Add1(in, out);
    in->Release();
    out->Release();
  }
  MemoryStats s = alloc.stats();
  EXPECT_LE(s.peak_allocated, 2 * HostAllocator::RoundSize(kMiB));
  EXPECT_LE(s.peak_reserved, 64 * kMiB);
  ex.gate = true;
  ASSERT_TRUE(q.Synchronize().ok());
  EXPECT_EQ(ex.runs.load(), 300);
}

// Memory a buffer's owners dropped while its only users were queued tasks is returned once: by
// the free, not again when the tasks let go.
TEST_F(StreamOrderedFreeTest, ReleasedMemoryIsReturnedOnce) {
  Buffer* x = New(kMiB);
  Buffer* y = New(kMiB);
  Add1(x, y);
  x->Release();
  y->Release();
  EXPECT_EQ(alloc.stats().allocated, 0);
  alloc.EmptyCache();  // the segment is free, but queued work still uses it: it stays
  EXPECT_EQ(alloc.num_segments(), 1);
  ex.gate = true;
  ASSERT_TRUE(q.Synchronize().ok());
  q.CollectGarbage();
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.num_frees, 2);
}

}  // namespace
}  // namespace tpu::host
