// The deferred engine: fused eager mode's windows (ARCHITECTURE "Deferred execution").
//
// Each device has one open window: a program being recorded. An op's lowering builds its small
// program as in every mode; in a window mode, Lowering::Run records it into the window instead of
// launching it (Window::Record) -- the same lowerings, no second path. The window keeps, for
// every storage it touched, its buffer's *ready* value (a parameter bound to the buffer) and/or
// its *pending* value (an IR value of the whole storage). Reading a tensor whose storage is
// pending gives the view of the pending value (ir/strided.h); writing through a view replaces the
// storage's pending value by an update of it, so aliasing is exact without copies at run time.
//
// A cut (Window::Cut) turns the window into one program: its results are the pending values of
// the storages still alive (dead intermediates are never written, nor given memory), compiled
// once per distinct window (a 128-bit fingerprint built as ops are recorded) and launched on the
// device queue. Windows are cut at host reads of pending data, synchronize(), before a CPU
// fallback op, at a size limit (option window_ops) or a work limit (option window_work, Note
// [Windows by work]), at mode changes, and when a view would alias a pending storage under
// another dtype. metrics count windows, their ops and each cut's reason.
//
// A window made for capture (Window(device, /*capture=*/true), csrc/torch/deferred/capture.h)
// records the same way but never cuts: what would cut it (a host read, a size limit, an alias
// under another dtype) ends the capture with a reason instead, and its program is taken whole by
// TakeProgram with the results the capture names.
#pragma once

#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/hash.h"
#include "ir/builder.h"
#include "ir/strided.h"
#include "runtime/device.h"

namespace tpu::torch_bridge {

enum class CutReason : int {
  kHostRead,     // the host reads (or resizes) a pending storage
  kSynchronize,  // a device-wide sync point: synchronize(), an event, the end of the process
  kSizeLimit,    // the window reached option window_ops
  kFallback,     // a CPU-fallback op is about to read the device
  kModeChange,   // the eager mode changed
  kAlias,        // a storage pending under one dtype is used under another
  kEachOp,       // a backend without strided bindings runs strict/debug mode as one-op windows
  kCompiledGraph,  // a compiled graph is launched and reads or writes what the window holds
  kCollective,     // a collective reads or writes a storage the window uses (distributed/issue.h)
  kOptimizerStep,  // an optimizer's step() returned: a training step's end (torch_tpu/modes.py)
  kBackward,       // a backward pass begins or ends (Note [Backward windows], window.cc)
  kOptimizerBegin,  // an optimizer's step() is called: the gradients are complete (torch_tpu/modes.py)
  kWorkLimit,      // the window's work reached option window_work (Note [Windows by work])
  kCount
};
const char* CutReasonName(CutReason reason);

// A random op's {seed, offset} parameter (Lowering::RngState): a compiled graph draws it again
// from `generator` at each replay, for `words` values, as the op would have.
struct RngDraw {
  int param = -1;  // the parameter's number: in the op's program, or in the window's
  c10::intrusive_ptr<c10::GeneratorImpl> generator;
  int64_t words = 0;
};

class Window {
 public:
  // `dense`: every storage enters as one whole-buffer parameter, views as ops on it, as on a
  // backend without strided bindings (an exported program's arguments are whole tensors).
  explicit Window(int device, bool capture = false, bool dense = false);
  ~Window();

  // Records a lowered op: `g` is its finished program (parameters first), `params` the bindings of
  // its parameters (moved from), `results` where each of g.results is written (the output
  // tensors' bindings), `rng` its random draws. May cut the window first (aliasing) or after
  // (size limit); a capture window throws instead (CaptureBreak, capture.h).
  void Record(const Graph& g, Binding* params, size_t num_params, const Binding* results, size_t num_results,
              const char* op, std::string location, const RngDraw* rng = nullptr, size_t num_rng = 0);
  // Compiles and launches the window (nothing when it is empty); returns the launch's sequence
  // number (0 when nothing ran). Throws on out-of-memory before anything is lost.
  uint64_t Cut(CutReason reason);
  // Cuts if the window holds a pending value of `buffer`.
  void CutIfPending(const Buffer* buffer, CutReason reason);
  // Keeps `buffer` alive until the next cut, so that its pending value is a result of the window
  // even when nothing else holds it: an op run for its effect, whose output nobody reads
  // (Lowering::ForEffect: torch._assert_async's check, Note [Check op]).
  void KeepUntilCut(Buffer* buffer);
  // Whether the window reads or writes `buffer`.
  bool Uses(const Buffer* buffer);
  // The pending window as StableHLO text, its results the live pending values (empty window: "").
  std::string Dump();
  int64_t ops();
  // Whether the window reads or writes any of `buffers` (one lock for all).
  bool UsesAny(Buffer* const* buffers, size_t n);

  // ---- capture mode ----
  bool capture() const { return capture_; }
  // A storage whose value the window computes.
  struct Pending {
    Buffer* buffer;
    TensorType type;  // of the whole storage's value
    int value;        // builder id
  };
  std::vector<Pending> PendingValues();
  // The parameter of `binding`'s whole storage (which it must cover), made now: an exported
  // program's arguments in the order of its inputs.
  int BindWhole(Binding binding);
  // The value `binding` reads now (its storage's pending value, or its ready value), as a
  // builder id: an exported program's results.
  int ReadValue(Binding binding);
  // The recorded program with `results` (builder ids from PendingValues) as its results, its
  // 128-bit key, the bindings of its parameters (moved out) and its random draws (by window
  // parameter number). The window is empty afterwards.
  struct Program {
    std::unique_ptr<Graph> graph;
    Fingerprint128 key;
    std::vector<Binding> params;
    std::vector<RngDraw> rng;
    std::shared_ptr<std::vector<OpOrigin>> origins;
  };
  StatusOr<Program> TakeProgram(const std::vector<int>& results);
  // Drops what was recorded without running or failing anything (a capture that was given up:
  // nothing it recorded has happened, so no storage lost a value).
  void Discard();

 private:
  struct Entry {
    Buffer* buffer = nullptr;  // one reference held by the entry
    int held = 1;              // references the window holds (the entry's and its parameters')
    int base = -1;             // builder id of the parameter bound to the whole buffer, or -1
    TensorType base_type;
    int value = -1;            // builder id of the storage's pending value, or -1
    TensorType value_type;
    // Strided parameters of the ready value (backends with strided bindings), by geometry.
    struct ViewParam {
      int64_t offset;
      DType dtype;
      Dims dims, strides;
      int id;
    };
    std::vector<ViewParam> views;
  };

  Entry& EntryLocked(Buffer* buffer);
  Entry* FindLocked(const Buffer* buffer);
  int ParamLocked(Binding binding);
  int BaseLocked(Entry& e, const Binding& view);
  int ReadLocked(Binding& binding);
  void WriteLocked(const Binding& binding, int value);
  // The view `binding` describes, of a whole-storage value v (of type `type`).
  int ViewOfValue(int v, const TensorType& type, const Binding& binding, bool pending);
  int FlatOf(int v, const TensorType& type, DType dtype, int64_t n);
  ViewOffset OffsetOf(const Binding& binding, bool pending);
  bool AliasesPending(const Binding& b);
  uint64_t CutLocked(CutReason reason);
  void AbandonLocked(const Status& why);
  void ResetLocked();
  bool StridedBindings() const;

  const int device_;
  const bool capture_;
  const bool dense_;
  // A capture window finds its entries here, not in Buffer::window_slot: the device's window
  // owns those fields, and a buffer may be in both windows at once.
  std::unordered_map<const Buffer*, int> slots_;
  std::vector<RngDraw> rng_;
  std::mutex mu_;
  Builder builder_;
  std::vector<Binding> params_;  // by parameter number
  std::vector<Entry> entries_;
  std::vector<Buffer*> kept_;  // KeepUntilCut: one reference each, released at the reset
  uint32_t epoch_ = 1;
  std::shared_ptr<std::vector<OpOrigin>> origins_;  // per recorded op
  Fingerprint128 fingerprint_;
  int64_t num_ops_ = 0;
  int64_t work_ = 0;  // flops recorded (option window_work)
  int autograd_task_ = -1;  // the autograd graph task the last op was recorded in (-1: none)
};

Window& WindowFor(int device);
// Cuts every device's window.
void CutAllWindows(CutReason reason);
// Whether Lowering::Run records into a window: fused mode, capture, or a backend whose bindings
// must be dense (strict/debug there are one-op windows).
bool RecordsIntoWindow();

}  // namespace tpu::torch_bridge
