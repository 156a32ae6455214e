// Executable: a compiled program, as a backend made it from a verified Graph. Backend-neutral:
// what it holds beyond this (the host executor's fused regions and buffer plan, a PJRT loaded
// executable) is the backend's own type derived from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tpu {

class Executable {
 public:
  virtual ~Executable() = default;
  // The program as submitted: parameter and result types, and what the compile cache compares
  // against to rule out fingerprint collisions.
  const Graph& source() const { return source_; }
  uint64_t fingerprint() const { return fingerprint_; }
  const std::string& name() const { return name_; }
  // Rough cost: elements produced, times the contraction length for dot_general/convolution and
  // the input length for reductions. A queue may run a program below a small bound on the
  // submitting thread when it is idle (WorkerQueue::Launch).
  int64_t work() const { return work_; }
  // Maps an op index of the executed program back to the op of source() it came from (-1 when
  // it has none); errors name the user's op through it.
  virtual int SourceOp(int executed_op) const { return executed_op; }

  void set_source(Graph g) { source_ = std::move(g); }
  void set_identity(uint64_t fingerprint, std::string name, int64_t work) {
    fingerprint_ = fingerprint;
    name_ = std::move(name);
    work_ = work;
  }

 private:
  Graph source_;
  uint64_t fingerprint_ = 0;
  std::string name_;
  int64_t work_ = 0;
};

using ExecutablePtr = std::shared_ptr<const Executable>;

}  // namespace tpu
