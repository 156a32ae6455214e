#include "runtime/host/dynamic_slice.h"

#include <algorithm>

namespace tpu::host {
namespace {

// The clamped start of dim d, read from operand `first + d`.
int64_t Start(const Op& op, const std::vector<View>& views, int first, int d, int64_t dim, int64_t size) {
  int64_t s = *static_cast<const int64_t*>(views[op.operands[first + d]].data);
  return std::clamp<int64_t>(s, 0, dim - size);
}

View Window(const View& base, const Op& op, const std::vector<View>& views, int first, const Dims& sizes) {
  View w = base;
  w.dims = sizes;
  int64_t off = 0;
  for (size_t d = 0; d < base.dims.size(); ++d)
    off += Start(op, views, first, static_cast<int>(d), base.dims[d], sizes[d]) * base.strides[d];
  w.data = static_cast<char*>(base.data) + off * DTypeSize(base.dtype);
  return w;
}

}  // namespace

void DynamicSliceView(const Op& op, const std::vector<View>& views, View* out) {
  *out = Window(views[op.operands[0]], op, views, 1, op.type.dims);
}

Status RunDynamicUpdateSlice(const Op& op, const std::vector<View>& views, const View& out) {
  const View& operand = views[op.operands[0]];
  const View& update = views[op.operands[1]];
  if (out.data != operand.data || out.strides != operand.strides) TPU_RETURN_IF_ERROR(CopyView(operand, out));
  return CopyView(update, Window(out, op, views, 2, update.dims));
}

}  // namespace tpu::host
