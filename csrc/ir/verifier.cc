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
        if (g.TypeOf(o).dims != op.type.dims)
          return Internal(std::string(OpName(op.code)) + " operand shape differs from its result");
    }
  }
  for (int r : g.results)
    if (r < 0 || r >= g.num_values()) return Internal("result is not a value");
  return Status::Ok();
}

}  // namespace tpu
