// nonzero / nonzero_static / masked_select: results whose size depends on the data.
//
// The IR has static shapes, so nonzero and masked_select run two programs: the first counts the
// set elements, the host reads the count (a real host sync, counted in `host_syncs`, as on any
// accelerator: the result's shape must be known before it can be allocated), and the second,
// specialized to that count, writes each set element's coordinates (or value) at its rank among
// the set elements (a prefix count), by a scatter whose unset elements aim out of range and are
// dropped. nonzero_static has its size given, so it needs no count and no sync.
// (index.Tensor with a boolean mask, argwhere and masked_select's callers reach these.)
//
// _assert_async(t[, msg]) asks the opposite of the host: that the one element be nonzero, without
// a sync. It is a check op (Note [Check op]) of kind kAssert carrying the message; its result goes
// to a one-element scratch tensor nobody reads, which a fused window keeps as a result until its
// cut (Lowering::ForEffect), so the check runs there too. A failure raises at the next sync
// point, naming the op and the user's line, as every data-dependent error does.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "torch/deferred/capture.h"
#include "torch/lower/complex_util.h"
#include "torch/lower/index_util.h"

namespace tpu::torch_bridge {
namespace {

// The set elements of `mask_like` (any dtype: nonzero), flattened row-major, as bool [n].
int SetElements(Builder& b, int x, int64_t n) {
  int flat = b.Reshape(x, {n});
  if (b.TypeOf(flat).dtype == DType::kBool) return flat;
  return b.Compare(CompareDirection::kNE, flat, b.ScalarLike(0, flat));
}

// Runs a program that counts the set elements and reads the count on the host (a sync).
int64_t CountSet(const char* op, const at::Tensor& t) {
  at::Tensor count = at::empty({}, t.options().dtype(at::kLong));
  {
    Lowering l(op);
    Builder& b = l.b();
    int set = b.Convert(SetElements(b, l.Input(t), t.numel()), DType::kI64);
    l.Output(b.Reduce(set, b.Constant(0, DType::kI64), {0}, ReduceKind::kAdd), count);
    l.Run();
  }
  return count.item<int64_t>();
}

// [n, 1] i64: each set element's rank among the set elements; `drop` (>= the result's rows)
// for the others, so an unchecked scatter skips them.
int TargetRows(Builder& b, int set, int64_t drop) {
  int rank = PrefixSum(b, b.Convert(set, DType::kI64), 0);
  rank = b.Binary(OpCode::kSubtract, rank, b.ScalarLike(1, rank));
  int64_t n = b.TypeOf(set).dims[0];
  return b.Reshape(b.Select(set, rank, b.ScalarLike(static_cast<double>(drop), rank)), {n, 1});
}

// out[rows, rank] = the coordinates of the set elements of self, in row-major order; rows past
// their count keep `fill` (nonzero_static).
void WriteNonzero(const char* op, const at::Tensor& self, int64_t rows, const at::Scalar& fill, const at::Tensor& out) {
  if (out.numel() == 0) return;
  int64_t n = self.numel();
  Dims shape = ToDims(self.sizes());
  int64_t rank = static_cast<int64_t>(shape.size());
  Lowering l(op);
  Builder& b = l.b();
  int set = SetElements(b, l.Input(self), n);
  std::vector<int> cols;
  for (int64_t k = 0; k < rank; ++k)
    cols.push_back(b.Reshape(b.Iota(TensorType{DType::kI64, shape}, k), {n, 1}));
  int coords = b.Concatenate(cols, 1);
  int base = b.BroadcastTo(l.Scalar(fill, at::kLong), {rows, rank});
  int r = b.Scatter(base, TargetRows(b, set, rows), coords, {1}, {0}, {0}, ReduceKind::kReplace,
                    /*checked=*/false);
  l.Output(r, out);
  l.Run();
}

at::Tensor& NonzeroInto(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar "
              "type", out.scalar_type());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  int64_t count = self.numel() == 0 ? 0 : CountSet("aten::nonzero", self);
  at::native::resize_output(out, {count, self.dim()});
  WriteNonzero("aten::nonzero", self, count, 0, out);
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  int64_t count = self.numel() == 0 ? 0 : CountSet("aten::nonzero", self);
  // Column-major, as CPU's result: the transpose of a [rank, count] tensor.
  at::Tensor out = at::empty({self.dim(), count}, self.options().dtype(at::kLong)).t();
  WriteNonzero("aten::nonzero", self, count, 0, out);
  return out;
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) { return NonzeroInto(self, out); }

at::Tensor nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  at::Tensor out = at::empty({size, self.dim()}, self.options().dtype(at::kLong));
  if (self.numel() == 0) {
    out.fill_(fill_value);
    return out;
  }
  WriteNonzero("aten::nonzero_static", self, size, fill_value, out);
  return out;
}

// ---- masked_select ---------------------------------------------------------------------------
at::Tensor& MaskedSelectInto(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "masked_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  CheckSameDevice("masked_select", {&self, &mask});
  auto [m, x] = at::expand_outplace(mask, self);
  int64_t count = m->numel() == 0 ? 0 : CountSet("aten::masked_select", *m);
  at::native::resize_output(out, {count});
  if (count == 0) return out;
  int64_t n = x->numel();
  Lowering l("aten::masked_select");
  Builder& b = l.b();
  int set = SetElements(b, l.Input(*m), n);
  int values = b.Reshape(l.Input(*x), {n});
  int base = b.BroadcastTo(b.Constant(0, b.TypeOf(values).dtype), {count});
  l.Output(b.Scatter(base, TargetRows(b, set, count), values, {}, {0}, {0}, ReduceKind::kReplace, /*checked=*/false),
           out);
  l.Run();
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return MaskedSelectInto(self, mask, out);
}
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  return MaskedSelectInto(self, mask, out);
}

// ---- _assert_async ----------------------------------------------------------------------------
void AssertAsync(const at::Tensor& self, const std::string& message) {
  // ATen's checks, at the call: exactly one element.
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  if (ActiveCapture()) CaptureBreak("_assert_async checks a value inside the graph without a result");
  at::Tensor flag = at::empty({}, self.options().dtype(at::kBool));
  {
    Lowering l("aten::_assert_async");
    Builder& b = l.b();
    int ok;
    if (IsComplex(self.scalar_type())) {
      // Note [Complex tensors]: nonzero when either part is.
      int pair = b.Reshape(l.Input(ResolvedRealView(self)), {2});
      ok = b.Reduce(b.Compare(CompareDirection::kNE, pair, b.ScalarLike(0, pair)), b.Constant(0, DType::kBool), {0},
                    ReduceKind::kOr);
    } else {
      int x = b.Reshape(l.Input(self), {});
      ok = b.TypeOf(x).dtype == DType::kBool ? x : b.Compare(CompareDirection::kNE, x, b.ScalarLike(0, x));
    }
    l.Output(l.Checked(ok, ok, CheckKind::kAssert, message), flag);
    l.ForEffect();
    l.Run();
  }
}
void assert_async(const at::Tensor& self) { AssertAsync(self, "Expected Tensor with single nonzero value, but got zero"); }
void assert_async_msg(const at::Tensor& self, c10::string_view msg) {
  AssertAsync(self, msg.empty() ? std::string("Assertion is failed") : std::string(msg));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzero_out);
  m.impl("nonzero_static", nonzero_static);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("_assert_async", assert_async);
  m.impl("_assert_async.msg", assert_async_msg);
}

}  // namespace tpu::torch_bridge
