// The tpu device's timeline in torch.profiler traces (Note [Device timeline] in profiler.cc).
#pragma once

#include <cstdint>

#include "runtime/queue.h"

namespace tpu::torch_bridge {

// Registers the Kineto activity profiler of the tpu device (once; at device registration).
void RegisterDeviceProfiler();
// Whether a profiler session is recording the device timeline (lowerings then capture the user's
// line of every op, and tag tasks with the issuing op).
bool DeviceProfiling();
// The Kineto correlation id of the innermost op being profiled on this thread (0: none).
uint64_t CurrentProfileId();
// A task's context tagged with the issuing op while profiling.
inline TaskContext ProfiledContext(const char* op) {
  TaskContext ctx(op);
  if (DeviceProfiling()) ctx.profile_id = CurrentProfileId();
  return ctx;
}

}  // namespace tpu::torch_bridge
