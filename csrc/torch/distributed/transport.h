// Transport: how the ranks of a process group exchange host memory for one collective. The c10d
// backend (backend.h) turns each collective into a Collective over two flat byte spaces -- the
// inputs and the outputs, each the concatenation of the collective's contiguous device tensors --
// and a transport turns it into a Plan: steps that the device queue runs in order, each
//   reads:  device bytes of the input space copied into host memory (Queue::ReadInto),
//   run:    host work (the exchange and reduction),
//   writes: host memory copied into the output space on the device (Queue::WriteFrom).
// Nothing waits on the issuing thread. Transports: ShmTransport (the ranks of one host, through
// shared memory) and GlooTransport (PyTorch's Gloo over TCP, across hosts).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/buffer.h"
#include "torch/distributed/descriptor.h"

namespace tpu::dist {

struct Collective {
  CollOp op = CollOp::kBarrier;
  DType dtype = DType::kU8;
  RedOp red = RedOp::kSum;
  int root = 0;  // broadcast/reduce/gather/scatter root; send: destination; recv: source (-1: any)
  int tag = 0;
  int64_t in_bytes = 0, out_bytes = 0;          // the flat spaces' sizes on this rank
  std::vector<int64_t> send_bytes, recv_bytes;  // all-to-all: bytes to / from each rank
  CollDesc desc;                                // what the ranks compare (Note [Collective descriptors])
  double timeout = 1800;                        // seconds
};

// A byte range of a flat space and the host memory it is read into or written from.
struct Piece {
  int64_t offset;
  int64_t nbytes;
  char* host;
};

// The state one collective's steps share: the first error, and for a receive from any rank who
// sent. Steps after a failed one do nothing; the collective's last task returns the error.
struct CollState {
  std::mutex mu;
  Status status;
  int source = -1;
  // The device buffers of the inputs: a step checks they hold a value before offering them.
  std::vector<Buffer*> inputs;
  ~CollState() {
    for (Buffer* b : inputs) b->Release();
  }
  bool InputsValid() const {
    for (Buffer* b : inputs)
      if (b->failed()) return false;
    return true;
  }
  Status Get() {
    std::lock_guard<std::mutex> lock(mu);
    return status;
  }
  bool failed() { return !Get().ok(); }
  void Fail(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (status.ok()) status = s;
  }
};

struct Step {
  std::vector<Piece> reads;
  std::function<Status()> run;  // returns the step's error (also recorded in the CollState)
  std::vector<Piece> writes;
};

struct Plan {
  std::vector<Step> steps;
  std::shared_ptr<void> keep;  // owns the host memory the pieces point into
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // The plan of `c` (on the issuing thread, in issue order; the steps run on the device queue).
  virtual StatusOr<Plan> Build(const Collective& c, const std::shared_ptr<CollState>& st) = 0;
  // Ends every wait of this group with `why`; later collectives fail at once with it.
  virtual void Abort(const std::string& why) = 0;
  // The reason the group is unusable, or OK.
  virtual Status Aborted() = 0;
};

}  // namespace tpu::dist
