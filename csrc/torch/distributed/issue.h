// Issuing one collective over device tensors (Note [Collectives on the device queue]).
//
// Note [Collectives on the device queue]: a collective is device work like any op: it is queued
// on its device's in-order queue and the caller never waits for it. Its inputs and outputs enter
// as contiguous device tensors (a non-contiguous one is copied by a device op first, and its
// result copied back by one after: values are exact for any strides). The queue reads the input
// bytes into host memory when it reaches them (Queue::ReadInto), runs the transport's host work
// (the exchange), writes the results back (Queue::WriteFrom), and ends with a task that returns
// the collective's status and owns its outputs: when the exchange failed they are failed (Note
// [Failed buffers]), so no op computes with them and the sync point that reads them raises.
// Fused eager mode: a collective cuts its device's open window first when the window reads or
// writes any of its tensors (the data it reads must be written, no pending value may land on its
// outputs after it, no recorded read of them may see its result); its outputs are ready buffers
// afterwards. A window that touches none of its tensors stays open.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "runtime/queue.h"
#include "torch/distributed/transport.h"

namespace tpu::dist {

struct TensorCall {
  const char* task_name = "c10d";  // the queue tasks' op name (a literal)
  Collective coll;                 // op, dtype, reduction, root, tag, splits, descriptor
  std::vector<at::Tensor> inputs;  // the input space, in order (this rank's)
  std::vector<at::Tensor> outputs;  // the output space; empty with in_place
  bool in_place = false;            // the outputs are the inputs
};

// A collective on the queue: its last task's sequence number and its shared state.
struct Issued {
  Queue* queue = nullptr;
  uint64_t seq = 0;
  std::shared_ptr<CollState> state;
};

// Queues `call` on device `device` through `transport` and returns at once; throws (at the
// caller's line) what is wrong with the arguments.
Issued IssueCollective(Transport& transport, TensorCall& call, int device);

}  // namespace tpu::dist
