// The host backend: virtual TPU devices whose memory is host memory and whose programs the host
// executor runs on the CPU -- the default backend and the reference for every other.
#pragma once

#include <memory>
#include <string>

#include "runtime/device.h"
#include "runtime/host/plan.h"

namespace tpu::host {

// The host backend's compile: the IR passes (compiler/), then fusion and buffer planning.
StatusOr<std::shared_ptr<const HostExecutable>> CompileForHost(const Graph& graph, const CompileOptions& options);

std::unique_ptr<Backend> MakeHostBackend();

// The persistent format of a host executable (plan_io.cc).
std::string SerializePlan(const HostExecutable& exe);
StatusOr<std::shared_ptr<const HostExecutable>> DeserializePlan(const std::string& bytes, const Graph& source,
                                                               const CompileOptions& options);

}  // namespace tpu::host
