// POSIX shared memory between the processes of one host: a named segment mapped into each, futex
// waits on words inside it, and whether a peer process is still alive.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace tpu::dist {

class ShmSegment {
 public:
  // A new segment of `bytes` (zero-filled; pages are backed when first touched).
  static StatusOr<std::unique_ptr<ShmSegment>> Create(const std::string& name, size_t bytes);
  // An existing one, at its full size.
  static StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name);
  // Takes ownership of a mapping of `size` bytes at `data`.
  ShmSegment(std::string name, char* data, size_t size) : name_(std::move(name)), data_(data), size_(size) {}
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Removes the name; the mapping stays valid in every process that has it (so nothing is left in
  // /dev/shm once all ranks have attached, even if a process is killed later).
  void Unlink();
  // This process does not own the name (it attached to another's segment).
  void Forget() { linked_ = false; }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  char* data_;
  size_t size_;
  bool linked_ = true;
};

// A unique segment name for this process ("/torch_tpu_<kind>_<pid>_<n>_<random>").
std::string NewSegmentName(const char* kind = "dist");
// Removes a segment's name (nothing if there is none).
void RemoveSegment(const std::string& name);

// Blocks while *word == expected, at most `timeout_us` (cross-process: the word is in a shared
// mapping). Spurious returns are fine: callers re-check their condition.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_us);
void FutexWakeAll(std::atomic<uint32_t>* word);

// Whether process `pid` (of this host's pid namespace) still runs: false once it exited or was
// killed, zombies included.
bool ProcessAlive(int pid);

}  // namespace tpu::dist
