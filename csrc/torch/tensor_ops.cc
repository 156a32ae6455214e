// Native tensor plumbing: factories, views, resize/set_, copies between host and device, and
// reading a scalar. Views share the device buffer (never a copy), so in-place ops on views
// update their base exactly as on CPU.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <cstring>

#include "base/metrics.h"
#include "torch/deferred/capture.h"
#include "torch/lower/complex_util.h"
#include "torch/lower/context.h"
#include "torch/pinned.h"
#include "torch/profiler.h"
#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

void CheckDType(at::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(IsStorageDType(t), "dtype ", t, " is not supported on the tpu device");
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  auto dt = dtype.value_or(at::get_default_dtype_as_scalartype());
  CheckDType(dt);
  c10::DeviceGuard guard(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
  return at::detail::empty_generic(size, GetTpuAllocator(), kTpuKeys, dt, memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  auto dt = dtype.value_or(at::get_default_dtype_as_scalartype());
  CheckDType(dt);
  c10::DeviceGuard guard(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
  return at::detail::empty_strided_generic(size, stride, GetTpuAllocator(), kTpuKeys, dt);
}

// Grows the storage (the hooks copy the old bytes into the new buffer on the device queue).
void GrowStorage(const at::Tensor& self, size_t nbytes) {
  const at::Storage& storage = self.storage();
  if (nbytes <= storage.nbytes()) return;
  at::native::resize_bytes_nocuda(storage, c10::SymInt(static_cast<int64_t>(nbytes)));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // Restore the old geometry if growing the storage fails (out of memory): the tensor must
  // never describe more elements than its storage holds.
  std::vector<int64_t> old_sizes(impl->sizes().begin(), impl->sizes().end());
  std::vector<int64_t> old_strides(impl->strides().begin(), impl->strides().end());
  impl->set_sizes_contiguous(size);
  auto fmt = memory_format.value_or(at::MemoryFormat::Contiguous);
  if (fmt != at::MemoryFormat::Preserve) impl->empty_tensor_restride(fmt);
  size_t needed = at::detail::computeStorageNbytes(size, impl->strides(), self.dtype().itemsize(),
                                                   self.storage_offset());
  try {
    GrowStorage(self, needed);
  } catch (...) {
    impl->set_sizes_and_strides(old_sizes, old_strides);
    throw;
  }
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage source, int64_t offset,
                                      at::IntArrayRef size, at::IntArrayRef stride) {
  // ATen's own checks (offset, size/stride lengths, same device) and storage swap, as on CPU.
  at::native::checkSetStorage(self, std::move(source), offset, size, stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  impl->set_sizes_and_strides(size, stride);
  size_t needed = at::detail::computeStorageNbytes(size, stride, self.dtype().itemsize(), offset);
  GrowStorage(self, needed);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_storage_offset(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_source_storage_offset(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());  // the new (empty) storage lives on self's device
  at::Storage storage(at::Storage::use_byte_size_t(), 0, GetTpuAllocator(), true);
  return set_source_storage_offset(self, std::move(storage), 0, {0}, {1});
}

void CountToDevice(int64_t bytes) {
  static Counter* h2d = GetCounter("transfers_to_device");
  static Counter* h2d_bytes = GetCounter("transfer_bytes_to_device");
  h2d->Add();
  h2d_bytes->Add(bytes);
}

// Device-side copy with dtype conversion and broadcasting, as one program on the queue.
void DeviceCopy(const at::Tensor& src, const at::Tensor& dst) {
  if (src.is_complex() || dst.is_complex()) return ComplexDeviceCopy(src, dst);  // Note [Complex tensors]
  Lowering l("aten::copy_");
  int v = l.Input(src);
  // A lazy negative view's values are its bytes negated (Note [Copies of lazy views]).
  if (src.is_neg() != dst.is_neg()) v = l.b().Unary(OpCode::kNegate, v);
  v = l.b().ConvertIfNeeded(v, ToDType(dst.scalar_type()));
  v = l.b().BroadcastTo(v, Dims(dst.sizes().begin(), dst.sizes().end()));
  l.Output(v, dst);
  l.Run();
}

// Host -> device, through the device queue: ordered after the queued work that reads or writes
// `dst`; the host data is copied (or written) before this returns, so the caller may reuse it.
void HostToDevice(const at::Tensor& src_arg, const at::Tensor& dst) {
  // Lazy conjugate/negative views hold other values than their bytes: write the values.
  at::Tensor src = src_arg.is_conj() || src_arg.is_neg() ? src_arg.resolve_conj().resolve_neg() : src_arg;
  at::Tensor host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  int64_t bytes = host.numel() * host.element_size();
  CountToDevice(bytes);
  if (bytes == 0) return;
  Binding target = BindingOf(dst);
  Buffer* buffer = target.buffer();
  if (dst.is_contiguous() && !DeferredUses(buffer)) {
    MaterializeOrThrow(buffer);
    DeviceOf(dst).queue().Write(buffer, target.byte_offset(), host.data_ptr(), bytes, ProfiledContext("copy to tpu"));
    return;
  }
  // A strided destination, or one the open fused window still computes: write a contiguous
  // staging buffer, then copy it into place as a device op.
  at::Tensor staging = at::empty(dst.sizes(), dst.options());
  Buffer* staged = BufferOf(staging);
  MaterializeOrThrow(staged);
  DeviceOf(dst).queue().Write(staged, 0, host.data_ptr(), bytes, ProfiledContext("copy to tpu"));
  DeviceCopy(staging, dst);
}

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(IsStorageDType(self.scalar_type()) && IsStorageDType(dst.scalar_type()),
              "copy between ", self.scalar_type(), " and ", dst.scalar_type(), " is not supported on the tpu device");
  bool src_dev = self.device().type() == c10::DeviceType::PrivateUse1;
  bool dst_dev = dst.device().type() == c10::DeviceType::PrivateUse1;
  // The broadcast check TensorIterator does for CPU copies, with its messages.
  at::DimVector shape = at::infer_size_dimvector(dst.sizes(), self.sizes());
  TORCH_CHECK(dst.sizes().equals(shape), "output with shape ", dst.sizes(), " doesn't match the broadcast shape ", shape);
  if (dst.numel() == 0) return dst;
  // ATen's copy_ hands non-CPU copies to us before its own overlap checks: do them here.
  at::assert_no_internal_overlap(dst);
  if (src_dev && dst_dev) {
    at::assert_no_partial_overlap(dst, self);
    if (self.device() == dst.device()) {
      DeviceCopy(self, dst);
    } else {
      HostToDevice(ReadToHost(self), dst);
    }
  } else if (dst_dev) {
    TORCH_CHECK(self.device().is_cpu(), "copy from ", self.device(), " to tpu is not supported: move it to the CPU first");
    if (non_blocking && CopyFromPinned(self, dst)) {  // Note [Pinned copies]
      CountToDevice(self.numel() * static_cast<int64_t>(self.element_size()));
      return dst;
    }
    HostToDevice(self, dst);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "copy from tpu to ", dst.device(), " is not supported: copy to the CPU first");
    at::Tensor host = ReadToHost(self);  // the bytes: a lazy conjugate/negative view keeps its bit
    if (self.is_conj()) host = host.conj();
    if (self.is_neg()) host = host._neg_view();
    const_cast<at::Tensor&>(dst).copy_(host);
  }
  return dst;
}

at::Tensor _copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    // An out= tensor the CPU fallback resizes takes the CPU result's layout too (some CPU
    // kernels resize out= column-major, e.g. linalg's), when that layout is dense.
    auto& d = const_cast<at::Tensor&>(dst);
    d.resize_(self.sizes());
    if (self.is_non_overlapping_and_dense() && d.strides() != self.strides())
      d.as_strided_(self.sizes(), self.strides(), d.storage_offset());
  }
  return ::tpu::torch_bridge::_copy_from(self, dst, false);
}

at::Scalar _local_scalar_dense(const at::Tensor& self) { return ReadToHost(self).item(); }

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.is_complex()) {
    ComplexFill(self, value);
    return self;
  }
  if (self.numel() == 0) return self;
  Lowering l("aten::fill_");
  int v = l.Scalar(value, self.scalar_type());
  l.Output(l.b().BroadcastTo(v, Dims(self.sizes().begin(), self.sizes().end())), self);
  l.Run();
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  if (self.is_complex() && IsCpuScalar(value)) return fill_scalar(self, value.item());
  if (self.numel() == 0) return self;
  if (self.is_complex()) {
    ComplexDeviceCopy(value, self);  // a 0-dim device value broadcast
    return self;
  }
  Lowering l("aten::fill_");
  int v = TensorOrScalar(l, value, self.scalar_type());
  l.Output(l.b().BroadcastTo(v, Dims(self.sizes().begin(), self.sizes().end())), self);
  l.Run();
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

// tensor.record_stream(s): the allocator's recordStream (device.cc says why it has nothing to do).
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1, "record_stream: expected a tpu tensor");
  static_cast<c10::DeviceAllocator*>(GetTpuAllocator())->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

// Note [Run copies]: dst <- src as device-to-device copies of the contiguous runs the two
// layouts share, queued in order with the device's other work, with no program. A copy whose
// shape differs on every call -- the edges of a graph that runs padded at its bound (Note
// [Bounded dims], torch_tpu/compile/_bounded.py) -- then compiles nothing. It applies on the host
// backend (PJRT's partial buffer copies stage through the host, so there a program is faster),
// outside a capture, when no open fused window uses either buffer, and for at most kMaxRuns
// runs; otherwise it returns false having copied nothing, and the caller copies with copy_.
bool CopyRuns(const at::Tensor& src, const at::Tensor& dst) {
  constexpr int64_t kMaxRuns = 4096;
  if (src.device() != dst.device() || src.device().type() != c10::DeviceType::PrivateUse1) return false;
  if (src.scalar_type() != dst.scalar_type() || !src.sizes().equals(dst.sizes())) return false;
  if (src.is_neg() || src.is_conj() || dst.is_neg() || dst.is_conj()) return false;
  if (GetBackend().name() != "host" || ActiveCapture() != nullptr) return false;
  if (dst.numel() == 0) return true;
  Buffer* sb = BufferOf(src);
  Buffer* db = BufferOf(dst);
  if (sb == nullptr || db == nullptr || sb == db || DeferredUses(sb) || DeferredUses(db)) return false;
  // The dims that matter (size > 1), outer first, and the longest contiguous inner run.
  std::vector<int64_t> sizes, ss, ds;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (src.size(d) == 1) continue;
    sizes.push_back(src.size(d));
    ss.push_back(src.stride(d));
    ds.push_back(dst.stride(d));
  }
  int64_t run = 1;
  while (!sizes.empty() && ss.back() == run && ds.back() == run) {
    run *= sizes.back();
    sizes.pop_back();
    ss.pop_back();
    ds.pop_back();
  }
  const int64_t runs = dst.numel() / run;
  if (runs > kMaxRuns) return false;
  const int64_t item = static_cast<int64_t>(src.element_size());
  const int64_t s0 = BindingOf(src).byte_offset(), d0 = BindingOf(dst).byte_offset();
  MaterializeOrThrow(sb);
  MaterializeOrThrow(db);
  Queue& queue = DeviceOf(dst).queue();
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t so = 0, dof = 0;
    for (size_t k = 0; k < index.size(); ++k) {
      so += index[k] * ss[k];
      dof += index[k] * ds[k];
    }
    queue.Copy(sb, s0 + so * item, db, d0 + dof * item, run * item, ProfiledContext("copy (runs)"));
    for (size_t k = index.size(); k-- > 0;) {
      if (++index[k] < sizes[k]) break;
      index[k] = 0;
    }
  }
  return true;
}

// Note [Copies of lazy views]: x.conj() and x._neg_view() are views whose values are their bytes
// conjugated / negated. ATen's copy_ hands every copy that involves a tpu tensor to _copy_from
// before it looks at those bits, and the Conjugate / Negative fallbacks would then resolve the
// source by cloning it -- a clone is another copy_, so the copy of a lazy view would recurse
// forever. _copy_from passes through those keys instead, and torch_tpu's _copy_from honors the
// bits itself (DeviceCopy and ComplexDeviceCopy negate in the program; a CPU source is resolved
// on the CPU; a device source read to the CPU keeps its bit there). Only cross-device and
// non-CPU copies reach _copy_from, so the CPU's copies are unaffected.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);  // Note [Complex tensors]: views of the same buffer
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", _copy_from);
  m.impl("_copy_from_and_resize", _copy_from_and_resize);
  m.impl("_local_scalar_dense", _local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("record_stream", record_stream);
}

}  // namespace tpu::torch_bridge
