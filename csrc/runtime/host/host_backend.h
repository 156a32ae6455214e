// The host backend: virtual TPU devices whose memory is host memory and whose programs the host
// executor runs on the CPU -- the default backend and the reference for every other.
#pragma once

#include <memory>

#include "runtime/device.h"
#include "runtime/host/plan.h"

namespace tpu::host {

// The host backend's compile: the IR passes (compiler/), then fusion and buffer planning.
StatusOr<std::shared_ptr<const HostExecutable>> CompileForHost(const Graph& graph, const CompileOptions& options);

std::unique_ptr<Backend> MakeHostBackend();

}  // namespace tpu::host
