// Compiling our programs with a PJRT plugin: the StableHLO text of a Graph (ir/printer.h) with
// what the backend adds to it -- donation as argument attributes, index checks as extra
// results -- compiled by PJRT_Client_Compile; and the persistent form of the result.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/executable.h"
#include "runtime/pjrt/buffers.h"
#include "runtime/pjrt/client.h"

namespace tpu::pjrt {

// Note [Checked indices on PJRT]: a gather or scatter built `checked` must fail on an
// out-of-range index (PyTorch's IndexError), but XLA clamps (gather) or skips (scatter). The
// program gets extra results instead: for each index component of each checked op, the minimum
// and maximum index (with 0), concatenated into one i64 vector after the program's own
// results. The executor reads it after the run and reports the first op whose indices leave
// their range, naming the index, the dimension and its size, as the host executor does.
//
// The check op (Note [Check op] in ir/graph.h), a custom_call XLA has no target for, is
// implemented the same way: it becomes its data operand (a no-op reshape), and the program
// returns, in the same vector, 1 when every element of its condition held (else 0).
struct IndexCheck {
  int op = -1;        // the checked op's index in the graph
  int64_t dim = 0;    // operand dimension the component indexes
  int64_t size = 0;   // that dimension's size
  int64_t max_start = 0;  // the largest valid index (size - slice size for a gather)
  int check_kind = -1;    // >= 0: a check op of this CheckKind, one entry (not an index check: two)
  std::string message;    // the check op's message (CheckOpMessage)
};

// What a program becomes for PJRT: its text and how the extra results are laid out.
struct PjrtProgram {
  std::string text;            // StableHLO, with the argument attributes
  int num_results = 0;         // the source graph's results
  // In op order: result `num_results` holds (min, max) per index check, the flag per check op.
  std::vector<IndexCheck> checks;
  // aliased[p]: the result parameter p is donated to (XLA may write it in p's memory), or -1.
  std::vector<int> aliased;
};
PjrtProgram MakeProgram(const Graph& graph, const CompileOptions& options);

// The serialized xla.CompileOptionsProto PJRT_Client_Compile takes (see compile.cc).
std::string CompileOptionsBytes(const std::string& platform_name);

class PjrtExecutable final : public Executable {
 public:
  PjrtExecutable(const Api* api, PJRT_LoadedExecutable* exe) : api_(api), exe_(exe) {}
  ~PjrtExecutable() override;
  PJRT_LoadedExecutable* loaded() const { return exe_; }
  const PjrtProgram& program() const { return program_; }
  void set_program(PjrtProgram p) { program_ = std::move(p); }
  int num_outputs() const { return program_.num_results + (program_.checks.empty() ? 0 : 1); }

 private:
  const Api* api_;
  PJRT_LoadedExecutable* exe_;
  PjrtProgram program_;
};

StatusOr<std::shared_ptr<const PjrtExecutable>> CompileForPjrt(const Client& client, const Graph& graph,
                                                               const CompileOptions& options);
// A program of the backend's own (not from a Graph), as StableHLO text with `num_outputs` results.
StatusOr<std::shared_ptr<const PjrtExecutable>> CompileText(const Client& client, const std::string& text,
                                                            const std::string& name, int num_outputs);
// The program that reinterprets the bytes of an array of type `from` as one of type `to` (the
// same number of bytes): bitcasts through u8; bool (pred) bytes convert to and from 0/1.
std::string ReinterpretProgram(const ArrayType& from, const ArrayType& to);

// PJRT_Executable_Serialize / PJRT_Executable_DeserializeAndLoad (Unimplemented where the
// plugin has neither).
StatusOr<std::string> SerializeExecutable(const Client& client, const PjrtExecutable& exe);
StatusOr<std::shared_ptr<const PjrtExecutable>> DeserializeExecutable(const Client& client, const std::string& bytes,
                                                                      const Graph& graph,
                                                                      const CompileOptions& options);

}  // namespace tpu::pjrt
