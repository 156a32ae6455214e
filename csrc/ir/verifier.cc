#include "ir/verifier.h"

#include <string>

namespace tpu {

Status Verify(const Graph& g) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    int self = g.num_params() + static_cast<int>(i);
    int arity = OpArity(op.code);
    if (arity >= 0 && static_cast<int>(op.operands.size()) != arity)
      return Internal(std::string(OpName(op.code)) + " expects " + std::to_string(arity) +
                      " operands, got " + std::to_string(op.operands.size()));
    if (op.code == OpCode::kParameterPlaceholder)
      return Internal("placeholder op left in a program");
    for (int o : op.operands)
      if (o < 0 || o >= self)
        return Internal(std::string(OpName(op.code)) + " uses value %" + std::to_string(o) +
                        " before it is defined");
    for (int64_t d : op.type.dims)
      if (d < 0) return Internal(std::string(OpName(op.code)) + " has a negative dimension");
    if (IsElementwise(op.code)) {  // convert included: it changes the element type only
      for (int o : op.operands)
        if (g.TypeOf(o).dims != op.type.dims || g.TypeOf(o).bounded != op.type.bounded)
          return Internal(std::string(OpName(op.code)) + " operand shape differs from its result");
    }
    // Note [Bounded dims in the IR]
    if (op.type.rank() < 64 && (op.type.bounded >> op.type.rank()) != 0)
      return Internal(std::string(OpName(op.code)) + " has a bounded dim past its rank");
    if (!BoundedOperandsAllowed(op.code))
      for (int o : op.operands)
        if (g.TypeOf(o).bounded)
          return Internal(std::string(OpName(op.code)) + " takes an operand with a bounded dim");
    if (op.code == OpCode::kGetDimensionSize || op.code == OpCode::kSetDimensionSize) {
      const TensorType& x = g.TypeOf(op.operands[0]);
      if (op.attrs.i < 0 || op.attrs.i >= x.rank())
        return Internal(std::string(OpName(op.code)) + " dimension out of range");
      if (op.code == OpCode::kGetDimensionSize ? op.type != TensorType{DType::kI32, {}}
                                               : g.TypeOf(op.operands[1]) != TensorType{DType::kI32, {}} ||
                                                     op.type.Static() != x.Static())
        return Internal(std::string(OpName(op.code)) + " has the wrong types");
    }
  }
  for (const TensorType& p : g.params)
    if (p.bounded) return Internal("a parameter has a bounded dim");
  for (int r : g.results) {
    if (r < 0 || r >= g.num_values()) return Internal("result is not a value");
    if (g.TypeOf(r).bounded) return Internal("a result has a bounded dim");
  }
  return Status::Ok();
}

}  // namespace tpu
