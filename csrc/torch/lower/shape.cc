// Shape ops that copy data: cat (stack reaches it), constant_pad_nd, narrow_copy, channel_shuffle,
// flip, roll, repeat, tril and triu. Views (diagonal, narrow, ...) and composites (clone, _unsafe_view) need no lowering.
// Complex tensors (Note [Complex tensors]): cat, flip, roll and repeat move their float pairs
// (the pair one more trailing dim); constant_pad_nd pads the real and imaginary parts.
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/cat_meta.h>
#include <ATen/ops/tril_meta.h>
#include <ATen/ops/triu_meta.h>
#include <torch/library.h>

#include "torch/lower/complex_util.h"
#include "torch/lower/structured.h"

namespace tpu::torch_bridge {
namespace {

// ---- cat -------------------------------------------------------------------------------------
// PyTorch's meta function checks shapes, promotes mixed dtypes and skips legacy empty tensors;
// here every empty input is skipped (it contributes nothing).
at::Tensor CatInto(const at::ITensorListRef& tensors, int64_t dim, MetaOut<at::meta::structured_cat>& m) {
  auto pre = m.meta(tensors, dim);
  at::Tensor out = m.out();
  if (out.numel() == 0) return out;
  if (out.is_complex()) {  // the parts' float pairs, each input converted to the result's dtype
    std::vector<at::Tensor> pairs;
    for (const at::Tensor& t : tensors)
      if (t.numel() > 0) pairs.push_back(ResolvedRealView(t.to(out.scalar_type())));
    at::view_as_real(out).copy_(at::cat(pairs, pre.dim));
    return out;
  }
  Lowering l("aten::cat");
  std::vector<int> parts;
  for (const at::Tensor& t : tensors)
    if (t.numel() > 0) parts.push_back(l.Input(t, out.scalar_type()));
  int r = parts.size() == 1 ? parts[0] : l.b().Concatenate(parts, pre.dim);
  l.Output(r, out);
  l.Run();
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  MetaOut<at::meta::structured_cat> m;
  return CatInto(tensors, dim, m);
}
at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  MetaOut<at::meta::structured_cat> m(out);
  CatInto(tensors, dim, m);
  return out;
}

// ---- constant_pad_nd -------------------------------------------------------------------------
// pad = (last_lo, last_hi, second_last_lo, ...); negative pads crop.
at::Tensor constant_pad_nd(const at::Tensor& self, at::IntArrayRef pad, const at::Scalar& value) {
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  int64_t rank = self.dim(), npad = static_cast<int64_t>(pad.size()) / 2;
  TORCH_CHECK(rank >= npad, "Length of pad should be no more than twice the number of dimensions of the input. Pad length is ",
              pad.size(), " while the input has ", rank, " dimensions.");
  Dims lo(rank, 0), hi(rank, 0), sizes = ToDims(self.sizes());
  for (int64_t i = 0; i < npad; ++i) {
    int64_t d = rank - 1 - i;
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    int64_t n = self.size(d) + lo[d] + hi[d];
    TORCH_CHECK(n >= 0, "The input size ", self.size(d), ", plus negative padding ", lo[d], " and ", hi[d],
                " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    sizes[d] = n;
  }
  at::Tensor out = at::empty(sizes, self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  Lowering l("aten::constant_pad_nd");
  Builder& b = l.b();
  if (self.is_complex()) {  // each part padded with its part of the value
    c10::complex<double> z = value.toComplexDouble();
    at::ScalarType real = c10::toRealValueType(self.scalar_type());
    CValue v = ComplexInput(l, self, ToDType(real), ToDims(self.sizes()));
    auto pad = [&](int part, double fill) {
      int f = l.Scalar(fill, real);
      return self.numel() == 0 ? b.BroadcastTo(f, sizes) : b.Pad(part, f, lo, hi, Dims(rank, 0));
    };
    int re = pad(v.re, z.real());
    int im = pad(v.im, z.imag());
    ComplexOutput(l, CValue{re, im}, out);
    l.Run();
    return out;
  }
  int x = l.Input(self);
  if (self.numel() == 0) {  // only padding remains
    l.Output(b.BroadcastTo(l.Scalar(value, self.scalar_type()), sizes), out);
  } else {
    l.Output(b.Pad(x, l.Scalar(value, self.scalar_type()), lo, hi, Dims(rank, 0)), out);
  }
  l.Run();
  return out;
}

// ---- narrow_copy.out ---------------------------------------------------------------------------
// The checks and messages of ATen's CPU kernel, then a copy of the narrowed view.
at::Tensor& narrow_copy_out(const at::Tensor& self, int64_t dim, c10::SymInt start_s, c10::SymInt length_s,
                            at::Tensor& output) {
  int64_t start = start_s.expect_int(), length = length_s.expect_int();
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  TORCH_CHECK(self.dtype() == output.dtype());
  if (dim < 0) {
    dim = at::maybe_wrap_dim(dim, self.dim());
  } else {
    TORCH_CHECK(dim < self.dim());
  }
  const int64_t cur_size = self.size(dim);
  TORCH_CHECK_INDEX(-cur_size <= start && start <= cur_size, "start out of range (expected to be in range of [",
                    -cur_size, ", ", cur_size, "], but got ", start, ")");
  if (start < 0) start += cur_size;
  TORCH_CHECK(length >= 0 && start <= cur_size - length, "start (", start, ") + length (", length,
              ") exceeds dimension size (", cur_size, ").");
  at::Tensor src = self.narrow(dim, start, length);
  ResizeOut(output, src.sizes());
  if (output.numel() > 0) output.copy_(src);
  return output;
}

// ---- channel_shuffle -------------------------------------------------------------------------
// [b, c, *rest] -> [b, c / g, g, *rest] order of channels: channel k of group j moves to k * g + j
// (ATen's checks; the result in the input's suggested memory format, as the CPU kernel's).
at::Tensor channel_shuffle(const at::Tensor& self, c10::SymInt groups_s) {
  int64_t groups = groups_s.expect_int();
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with ",
              self.dim(), " dims");
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  const int64_t c = self.size(1);
  TORCH_CHECK((c % groups) == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  if (self.is_complex()) {
    // the float pairs: channels stay dim 1, the pair is one more trailing dim
    at::view_as_real(out).copy_(::tpu::torch_bridge::channel_shuffle(ResolvedRealView(self), groups_s));
    return out;
  }
  Lowering l("aten::channel_shuffle");
  Builder& b = l.b();
  int64_t rest = self.numel() / (self.size(0) * c);
  int x = b.Reshape(l.Input(self), {self.size(0), groups, c / groups, rest});
  x = b.Transpose(x, {0, 2, 1, 3});
  l.Output(b.Reshape(x, ToDims(self.sizes())), out);
  l.Run();
  return out;
}

// ---- flip / roll -----------------------------------------------------------------------------
// x with dim `d` re-indexed by `index` (i64 [n]): a gather of whole slices, out = x[..., index, ...].
int TakeAlong(Builder& b, int x, int64_t d, int index) {
  Dims dims = b.TypeOf(x).dims;
  Dims slice = dims, offset_dims;
  slice[d] = 1;
  for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k)
    if (k != d) offset_dims.push_back(k);
  int vec = b.Reshape(index, {dims[d], 1});
  return b.Gather(x, vec, offset_dims, {d}, {d}, slice, /*checked=*/false);  // always in range
}

at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  auto flipped = at::dim_list_to_bitset(dims, self.dim());  // wraps dims, rejects duplicates
  if (self.is_complex()) {
    std::vector<int64_t> wrapped;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (flipped[d]) wrapped.push_back(d);
    return at::view_as_complex(::tpu::torch_bridge::flip(ResolvedRealView(self), wrapped));
  }
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (out.numel() == 0) return out;
  Lowering l("aten::flip");
  Builder& b = l.b();
  Dims reversed;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (flipped[d]) reversed.push_back(d);
  l.Output(b.Reverse(l.Input(self), reversed), out);  // (size-one dims drop out; none left: a copy)
  l.Run();
  return out;
}

at::Tensor roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  bool flat = dims.empty() && shifts.size() == 1;
  TORCH_CHECK(flat || shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  if (self.is_complex() && self.numel() > 0) {  // dims wrapped against the complex rank
    if (flat) {
      const int64_t dim0[] = {0};
      return at::view_as_complex(::tpu::torch_bridge::roll(ResolvedRealView(self.reshape({-1})), shifts, dim0))
          .view(self.sizes());
    }
    std::vector<int64_t> wrapped;
    for (int64_t d : dims) wrapped.push_back(at::maybe_wrap_dim(d, self.dim(), /*wrap_scalar=*/false));
    return at::view_as_complex(::tpu::torch_bridge::roll(ResolvedRealView(self), shifts, wrapped));
  }
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (out.numel() == 0) return out;
  Lowering l("aten::roll");
  Builder& b = l.b();
  int x = l.Input(self);
  Dims sizes = ToDims(self.sizes());
  if (flat) x = b.Reshape(x, {self.numel()});
  for (size_t i = 0; i < shifts.size(); ++i) {
    // A 0-dim tensor has no dim 0 to roll along (ATen raises, as self.size(0) would).
    int64_t d = flat ? 0 : at::maybe_wrap_dim(dims[i], self.dim(), /*wrap_scalar=*/false);
    int64_t n = b.TypeOf(x).dims[d];
    int64_t start = ((-shifts[i]) % n + n) % n;  // out[j] = x[(j + start) mod n]
    if (start == 0 && n > 1) continue;
    int iota = b.Iota(TensorType{DType::kI64, {n}}, 0);
    // The shift is a runtime scalar: a new shift value reuses the compiled program.
    int idx = b.Binary(OpCode::kAdd, iota, b.BroadcastTo(l.Scalar(start, at::kLong), {n}));
    int n_c = b.ScalarLike(n, idx);
    idx = b.Select(b.Compare(CompareDirection::kGE, idx, n_c), b.Binary(OpCode::kSubtract, idx, n_c), idx);
    x = TakeAlong(b, x, d, idx);
  }
  if (flat) x = b.Reshape(x, sizes);
  l.Output(x, out);
  l.Run();
  return out;
}

// ---- repeat ----------------------------------------------------------------------------------
at::Tensor repeat(const at::Tensor& self, at::IntArrayRef repeats) {
  TORCH_CHECK(static_cast<int64_t>(repeats.size()) >= self.dim(),
              "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  if (self.is_complex()) {
    std::vector<int64_t> pair_repeats(repeats.begin(), repeats.end());
    pair_repeats.push_back(1);
    return at::view_as_complex(::tpu::torch_bridge::repeat(ResolvedRealView(self), pair_repeats));
  }
  int64_t rank = static_cast<int64_t>(repeats.size()), lead = rank - self.dim();
  Dims padded(lead, 1), result(rank), expanded, bdims;
  for (int64_t s : self.sizes()) padded.push_back(s);
  for (int64_t i = 0; i < rank; ++i) {
    TORCH_CHECK(repeats[i] >= 0, "Trying to create tensor with negative dimension ", repeats[i], ": ", repeats);
    result[i] = padded[i] * repeats[i];
    expanded.push_back(repeats[i]);  // [r0, s0, r1, s1, ...]: each size tiled r times
    expanded.push_back(padded[i]);
    bdims.push_back(2 * i + 1);
  }
  at::Tensor out = at::empty(result, self.options());
  if (out.numel() == 0) return out;
  Lowering l("aten::repeat");
  Builder& b = l.b();
  int x = b.Reshape(l.Input(self), padded);
  x = b.BroadcastInDim(x, expanded, bdims);
  l.Output(b.Reshape(x, result), out);
  l.Run();
  return out;
}

// ---- tril / triu -----------------------------------------------------------------------------
// Keeps x[..., i, j] where j - i <= k (tril) or >= k (triu), else 0. k is a runtime scalar.
template <class Meta>
at::Tensor TriangleInto(const char* op, bool lower, const at::Tensor& self, int64_t k, const at::Tensor& out_arg) {
  MetaOut<Meta> m(out_arg);
  m.meta(self, k);
  at::Tensor out = m.out();
  if (out.numel() == 0) return out;
  Lowering l(op);
  Builder& b = l.b();
  Dims dims = ToDims(self.sizes());
  int64_t rank = self.dim();
  Dims mat = {dims[rank - 2], dims[rank - 1]};
  int row = b.Iota(TensorType{DType::kI64, mat}, 0), col = b.Iota(TensorType{DType::kI64, mat}, 1);
  int diff = b.Binary(OpCode::kSubtract, col, row);
  int kv = b.BroadcastTo(l.Scalar(k, at::kLong), mat);
  int keep = b.Compare(lower ? CompareDirection::kLE : CompareDirection::kGE, diff, kv);
  keep = b.BroadcastInDim(keep, dims, {rank - 2, rank - 1});
  int x = l.Input(self);
  l.Output(b.Select(keep, x, b.ScalarLike(0, x)), out);
  l.Run();
  return out;
}

at::Tensor& tril_out(const at::Tensor& self, int64_t k, at::Tensor& out) {
  TriangleInto<at::meta::structured_tril>("aten::tril", true, self, k, out);
  return out;
}
at::Tensor& triu_out(const at::Tensor& self, int64_t k, at::Tensor& out) {
  TriangleInto<at::meta::structured_triu>("aten::triu", false, self, k, out);
  return out;
}
at::Tensor tril(const at::Tensor& self, int64_t k) {
  return TriangleInto<at::meta::structured_tril>("aten::tril", true, self, k, at::Tensor());
}
at::Tensor triu(const at::Tensor& self, int64_t k) {
  return TriangleInto<at::meta::structured_triu>("aten::triu", false, self, k, at::Tensor());
}
at::Tensor& tril_(at::Tensor& self, int64_t k) {
  TriangleInto<at::meta::structured_tril>("aten::tril_", true, self, k, self);
  return self;
}
at::Tensor& triu_(at::Tensor& self, int64_t k) {
  TriangleInto<at::meta::structured_triu>("aten::triu_", false, self, k, self);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
  m.impl("constant_pad_nd", constant_pad_nd);
  m.impl("narrow_copy.out", narrow_copy_out);
  m.impl("channel_shuffle", channel_shuffle);
  m.impl("flip", flip);
  m.impl("roll", roll);
  m.impl("repeat", repeat);
  m.impl("tril", tril);
  m.impl("tril_", tril_);
  m.impl("tril.out", tril_out);
  m.impl("triu", triu);
  m.impl("triu_", triu_);
  m.impl("triu.out", triu_out);
}

}  // namespace tpu::torch_bridge
