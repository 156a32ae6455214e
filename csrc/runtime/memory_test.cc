// runtime/memory: the cgroup limits a host-backed device's budget respects, and frees in a
// forked child (Note [Frees after fork]).
#include "runtime/memory.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tpu {
namespace {

namespace fs = std::filesystem;

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tpu_cgroup_test_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  int64_t Available(const std::string& proc_self_cgroup) {
    return CgroupAvailableBytes(proc_self_cgroup, root_.string());
  }
  fs::path root_;
};

TEST_F(CgroupTest, V2TakesTheTightestLimitOfTheCgroupAndItsAncestors) {
  Write("memory.max", "max");
  Write("a/memory.max", "1000");
  Write("a/memory.current", "300");
  Write("a/b/memory.max", "max");
  Write("a/b/memory.current", "250");
  EXPECT_EQ(Available("0::/a/b\n"), 700);
  Write("a/b/memory.max", "400");
  EXPECT_EQ(Available("0::/a/b\n"), 150);
  Write("a/b/memory.current", "900");  // over its limit: nothing left, never negative
  EXPECT_EQ(Available("0::/a/b\n"), 0);
}

TEST_F(CgroupTest, V2WithoutALimitIsUnlimited) {
  Write("memory.max", "max");
  Write("memory.current", "12345");
  EXPECT_EQ(Available("0::/\n"), -1);
  EXPECT_EQ(Available(""), -1);
}

TEST_F(CgroupTest, AContainersCgroupIsTheMountedRoot) {
  // /proc/self/cgroup names the host's path, which the container does not have.
  Write("memory.max", "800");
  Write("memory.current", "100");
  EXPECT_EQ(Available("0::/kubepods/pod123/abc\n"), 700);
}

TEST_F(CgroupTest, V1ReadsTheMemoryController) {
  Write("memory/x/memory.limit_in_bytes", "5000");
  Write("memory/x/memory.usage_in_bytes", "1000");
  EXPECT_EQ(Available("12:cpu,cpuacct:/x\n4:memory:/x\n1:name=systemd:/x\n"), 4000);
  Write("memory/x/memory.limit_in_bytes", "9223372036854771712");  // v1's "no limit"
  EXPECT_EQ(Available("4:memory:/x\n"), -1);
  EXPECT_EQ(Available("12:cpu,cpuacct:/x\n"), -1);  // no memory controller
}

TEST(HostMemoryTest, AvailableBytesArePositiveAndBounded) {
  int64_t n = HostAvailableBytes();
  EXPECT_GT(n, 0);
  EXPECT_LT(n, int64_t{1} << 50);
}

class CountingAllocator : public Allocator {
 public:
  StatusOr<Buffer*> Allocate(int64_t nbytes, bool) override { return new Buffer(nbytes, this, 0); }
  Status Materialize(Buffer*) override { return Status::Ok(); }
  void Free(Buffer* b) override {
    ++frees;
    delete b;
  }
  MemoryStats stats() const override { return {}; }
  void ResetPeak() override {}
  void ResetAccumulated() override {}
  void EmptyCache() override {}
  int64_t capacity() const override { return 0; }
  std::atomic<int> frees{0};
};

TEST(HostMemoryTest, AForkedChildFreesNothing) {
  CountingAllocator a;
  Buffer* b = a.Allocate(64, true).value();
  EXPECT_FALSE(InForkedChild());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The parent's allocator lock may be held by a thread that does not exist here.
    b->Release();
    _exit(InForkedChild() && a.frees.load() == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  b->Release();  // the parent frees as usual
  EXPECT_EQ(a.frees.load(), 1);
}

}  // namespace
}  // namespace tpu
