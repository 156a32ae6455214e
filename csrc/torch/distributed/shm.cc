#include "torch/distributed/shm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>

namespace tpu::dist {
namespace {

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

StatusOr<std::unique_ptr<ShmSegment>> Map(int fd, const std::string& name, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  errno = err;
  if (p == MAP_FAILED) return Errno("mmap of shared memory segment " + name);
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, static_cast<char*>(p), bytes));
}

}  // namespace

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Errno("shm_open(" + name + ")");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status st = Errno("ftruncate of shared memory segment " + name + " to " + std::to_string(bytes) +
                      " bytes (is /dev/shm large enough?)");
    close(fd);
    shm_unlink(name.c_str());
    return st;
  }
  auto seg = Map(fd, name, bytes);
  if (!seg.ok()) shm_unlink(name.c_str());
  return seg;
}

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Errno("shm_open(" + name + ")");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Status s = Errno("fstat of shared memory segment " + name);
    close(fd);
    return s;
  }
  auto seg = Map(fd, name, static_cast<size_t>(st.st_size));
  if (seg.ok()) seg.value()->Forget();  // the creator unlinks it
  return seg;
}

ShmSegment::~ShmSegment() {
  munmap(data_, size_);
  Unlink();
}

void ShmSegment::Unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

std::string NewSegmentName(const char* kind) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  char buf[96];
  std::snprintf(buf, sizeof(buf), "/torch_tpu_%s_%d_%llu_%08x", kind, static_cast<int>(getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)), rd());
  return buf;
}

void RemoveSegment(const std::string& name) { shm_unlink(name.c_str()); }

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us) {
  struct timespec ts;
  ts.tv_sec = timeout_us / 1000000;
  ts.tv_nsec = (timeout_us % 1000000) * 1000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child its parent has not reaped yet still answers kill(): read its state.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return true;  // no /proc: kill() said it exists
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close_paren = std::strrchr(buf, ')');  // "pid (comm) S ..."
  if (!close_paren || close_paren[1] != ' ') return true;
  char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

}  // namespace tpu::dist
