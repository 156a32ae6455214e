// Runtime interface, split by lifetime: Backend -> Device -> (Allocator, Queue); Executable.
// Every backend implements all of it: the host executor (runtime/host) and PJRT (runtime/pjrt).
// Nothing here is any backend's internals; the process's backend is chosen in csrc/backends.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "ir/graph.h"
#include "runtime/allocator.h"
#include "runtime/buffer.h"
#include "runtime/executable.h"
#include "runtime/queue.h"

namespace tpu {

struct DeviceProperties {
  std::string name;       // "TPU v6e (host executor)"
  std::string chip;       // "v6e"
  std::string kind;       // the backend's own device kind ("host", PJRT's device kind string)
  int64_t memory_capacity = 0;
  int64_t hbm_bytes = 0;  // what the real chip has
  int index = 0;
};

// What a compile may be asked for besides the graph; part of the compile-cache key.
struct CompileOptions {
  const char* name = "";  // for errors, profiles and dumps (must outlive the compile)
  // Parameter i may be overwritten by the program (its buffer is also result `donated[i]`'s);
  // -1 where not. Empty: nothing donated.
  SmallVector<int, 4> donated;
  uint64_t Hash() const;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceProperties& properties() const = 0;
  virtual Allocator& allocator() = 0;
  virtual Queue& queue() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;     // "host", "pjrt"
  // What makes its executables differ from another build's or plugin's (compile-cache key).
  virtual std::string version() const = 0;
  virtual std::string description() const = 0;  // for torch.tpu.get_device_properties()
  virtual int device_count() const = 0;
  virtual Device& device(int index) = 0;
  // Compiles a verified graph for this backend's devices.
  virtual StatusOr<ExecutablePtr> Compile(const Graph& graph, const CompileOptions& options) = 0;
  // Whether launches may bind strided views into buffers (the host executor's optimization).
  // Without it every binding covers a whole buffer, densely (PJRT).
  virtual bool strided_bindings() const = 0;
  // The persistent compile cache's format of an executable; Unimplemented where a backend has
  // none (then the cache keeps only the in-process tier for it).
  virtual StatusOr<std::string> Serialize(const Executable& exe) const;
  virtual StatusOr<ExecutablePtr> Deserialize(const std::string& bytes, const Graph& source,
                                              const CompileOptions& options) const;
};

// The process's backend (csrc/backends: the host executor unless TORCH_TPU_BACKEND says otherwise).
Backend& GetBackend();

// HBM per chip kind; 0 for an unknown kind.
int64_t ChipHbmBytes(const std::string& chip);

}  // namespace tpu
