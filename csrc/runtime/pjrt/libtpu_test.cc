// libtpu on a machine without a TPU: choosing it (TORCH_TPU_PJRT_PLUGIN pointing at it) must
// fail within seconds with an error that says there is no TPU -- never block on the cloud
// metadata server. Run in a child process (this binary, filtered to the child test), so that
// libtpu never shares a process with the other tests' plugin.
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/pjrt/pjrt_test_util.h"

namespace tpu::pjrt::testing {
namespace {

// libtpu's path: among the plugin candidates (torch_tpu lists it when the package is installed).
std::string LibtpuPath() {
  for (const std::string& c : SplitPaths(PathOption("pjrt_plugin_candidates")))
    if (IsLibtpu(c) && access(c.c_str(), R_OK) == 0) return c;
  return "";
}
const std::string kLibtpu = LibtpuPath();  // before main(): other tests reset the options

TEST(PjrtLibtpuTest, ChoosingLibtpuWithoutATpuFailsFastAndSaysSo) {
  if (kLibtpu.empty())
    GTEST_SKIP() << "libtpu is not installed (pip install libtpu; scripts/test.sh lists it among the candidates)";
  if (TpuPresent()) GTEST_SKIP() << "this machine has a TPU";
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  // The child sees neither TPU_SKIP_MDS_QUERY nor TPU_LOG_DIR: the backend must set them.
  std::string cmd = "env -u TPU_SKIP_MDS_QUERY -u TPU_LOG_DIR TPU_TEST_LIBTPU_CHILD='" + kLibtpu + "' timeout 120 '" +
                    self + "' --gtest_filter=PjrtLibtpuChild.* 2>&1";
  auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t got = fread(buf, 1, sizeof(buf), p)) out.append(buf, got);
  int rc = pclose(p);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "child failed (rc " << rc << "):\n" << out;
  EXPECT_NE(out.find("no TPU found on this machine"), std::string::npos) << out;
  EXPECT_LT(s, 5.0) << "selecting libtpu took " << s << " s:\n" << out;
  std::printf("child (%.2f s):\n%s\n", s, out.substr(out.find("[ RUN")).c_str());
}

TEST(PjrtLibtpuChild, MakeBackend) {
  const char* path = std::getenv("TPU_TEST_LIBTPU_CHILD");
  if (!path) GTEST_SKIP() << "run by PjrtLibtpuTest in a child process";
  PjrtBackendOptions o;
  o.plugin = path;
  o.init_timeout_s = 20;
  auto t0 = std::chrono::steady_clock::now();
  auto b = MakePjrtBackend(o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(b.ok()) << "libtpu started on a machine without a TPU?";
  std::printf("error after %.2f s: %s\n", s, b.status().ToString().c_str());
  const char* mds = std::getenv("TPU_SKIP_MDS_QUERY");
  EXPECT_STREQ(mds, "1");
  const char* logs = std::getenv("TPU_LOG_DIR");
  ASSERT_NE(logs, nullptr);
  EXPECT_NE(std::string(logs).find("torch_tpu_libtpu_"), std::string::npos) << logs;
  std::filesystem::remove_all(logs);
}

}  // namespace
}  // namespace tpu::pjrt::testing
