#include "runtime/pjrt/executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tpu::pjrt {
namespace {

ArrayType ArrayTypeOf(const TensorType& t) { return ArrayType{ToPjrtType(t.dtype), t.dims}; }

std::string Key(const ArrayType& t) {
  std::string k(1, static_cast<char>(t.type));
  for (int64_t d : t.dims) k += "x" + std::to_string(d);
  return k;
}

// Destroys the arrays it holds unless released.
struct ArrayList {
  const Api& api;
  std::vector<PJRT_Buffer*> v;
  ~ArrayList() {
    for (PJRT_Buffer* b : v) DestroyBuffer(api, b);
  }
};

}  // namespace

PjrtExecutor::PjrtExecutor(const Client* client, int device_index)
    : client_(client), api_(client->api()), device_(client->device(device_index)) {}

PjrtExecutor::~PjrtExecutor() {
  for (auto& [key, b] : scalars_) DestroyBuffer(api_, b);
}

void PjrtExecutor::Replace(Buffer* b, void* array) {
  PJRT_Buffer* old;
  {
    std::lock_guard<std::mutex> lock(contents_mu_);
    old = PjrtBufferOf(b);
    b->set_contents(array ? array : kUnwritten);
  }
  if (old != array) DestroyBuffer(api_, old);
}

Status PjrtExecutor::Execute(const PjrtExecutable& exe, const std::vector<PJRT_Buffer*>& args,
                             const std::vector<int64_t>& non_donatable, std::vector<PJRT_Buffer*>* outputs) {
  auto options = TPU_PJRT_ARGS(PJRT_ExecuteOptions);
  options.non_donatable_input_indices = non_donatable.data();
  options.num_non_donatable_input_indices = non_donatable.size();
  outputs->assign(exe.num_outputs(), nullptr);
  PJRT_Buffer* const* arg_lists[1] = {args.data()};
  PJRT_Buffer** output_lists[1] = {outputs->data()};
  PJRT_Event* done[1] = {nullptr};
  auto call = TPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  call.executable = exe.loaded();
  call.options = &options;
  call.argument_lists = arg_lists;
  call.num_devices = 1;
  call.num_args = args.size();
  call.output_lists = output_lists;
  call.device_complete_events = done;
  call.execute_device = device_;
  Status st = api_.ToStatus(api_->PJRT_LoadedExecutable_Execute(&call), "PJRT_LoadedExecutable_Execute");
  if (!st.ok()) {
    outputs->assign(exe.num_outputs(), nullptr);  // not populated on error
    return st;
  }
  st = api_.AwaitAndDestroy(done[0], "running the program");
  if (!st.ok()) {
    for (PJRT_Buffer*& b : *outputs) DestroyBuffer(api_, b), b = nullptr;
  }
  return st;
}

StatusOr<PJRT_Buffer*> PjrtExecutor::Reinterpret(PJRT_Buffer* array, const ArrayType& from, const ArrayType& to) {
  std::string key = Key(from) + "->" + Key(to);
  auto it = reinterpret_.find(key);
  if (it == reinterpret_.end()) {
    TPU_ASSIGN_OR_RETURN(auto exe, CompileText(*client_, ReinterpretProgram(from, to), "reinterpret " + key, 1));
    it = reinterpret_.emplace(key, std::move(exe)).first;
  }
  std::vector<PJRT_Buffer*> out;
  // The source array is kept (it may be another binding's): not donated.
  TPU_RETURN_IF_ERROR(Execute(*it->second, {array}, {0}, &out));
  return out[0];
}

StatusOr<PJRT_Buffer*> PjrtExecutor::ArrayFor(Buffer* b, const ArrayType& want, bool replace,
                                              std::vector<PJRT_Buffer*>* temps) {
  PJRT_Buffer* cur = PjrtBufferOf(b);
  PJRT_Buffer* made = nullptr;
  if (cur) {
    TPU_ASSIGN_OR_RETURN(ArrayType have, TypeOf(api_, cur));
    if (have == want) return cur;
    if (b->nbytes() == 0) {
      TPU_ASSIGN_OR_RETURN(made, Upload(api_, client_->get(), device_, nullptr, want.type, want.dims));
    } else {
      TPU_ASSIGN_OR_RETURN(made, Reinterpret(cur, have, want));
    }
  } else {
    // Never written: device memory nothing initialized, read as zeros.
    std::vector<char> zeros(static_cast<size_t>(b->nbytes()));
    TPU_ASSIGN_OR_RETURN(made, Upload(api_, client_->get(), device_, zeros.data(), want.type, want.dims));
  }
  if (replace) {
    Replace(b, made);
  } else {
    temps->push_back(made);
  }
  return made;
}

StatusOr<PJRT_Buffer*> PjrtExecutor::ScalarArray(const Binding& b) {
  int64_t n = b.NumElements() * DTypeSize(b.dtype());
  std::string key(1, static_cast<char>(b.dtype()));
  for (int64_t d : b.dims()) key += "x" + std::to_string(d);
  key += ":";
  key.append(static_cast<const char*>(b.inline_bytes()), static_cast<size_t>(n));
  auto it = scalars_.find(key);
  if (it != scalars_.end()) return it->second;
  if (scalars_.size() >= 1024) {
    for (auto& [k, a] : scalars_) DestroyBuffer(api_, a);
    scalars_.clear();
  }
  TPU_ASSIGN_OR_RETURN(PJRT_Buffer * a,
                       Upload(api_, client_->get(), device_, b.inline_bytes(), ToPjrtType(b.dtype()), b.dims()));
  scalars_.emplace(std::move(key), a);
  return a;
}

Status PjrtExecutor::Run(const Launch& launch, RunReport* report) {
  const auto* exe = dynamic_cast<const PjrtExecutable*>(launch.executable.get());
  if (!exe) return Internal("the PJRT backend was asked to run a program another backend compiled");
  const Graph& g = exe->source();
  const PjrtProgram& program = exe->program();
  int np = g.num_params();
  if (static_cast<int>(launch.params.size()) != np || launch.results.size() != g.results.size())
    return Internal("launch of " + exe->name() + " has the wrong number of arguments");
  ArrayList temps{api_, {}};
  std::vector<PJRT_Buffer*> args(np, nullptr);
  std::vector<int64_t> non_donatable;
  for (int p = 0; p < np; ++p) {
    const Binding& b = launch.params[p];
    if (b.type() != g.params[p])
      return Internal("argument " + std::to_string(p) + " of " + exe->name() + " does not match its type");
    if (b.is_inline()) {
      TPU_ASSIGN_OR_RETURN(args[p], ScalarArray(b));
      non_donatable.push_back(p);
      continue;
    }
    if (!b.buffer())
      return Internal("argument " + std::to_string(p) + " of " + exe->name() +
                      " is host memory: only the host executor takes external bindings");
    if (!b.CoversBuffer())
      return Internal("argument " + std::to_string(p) + " of " + exe->name() +
                      " binds part of a buffer (an offset or strides): the PJRT backend takes whole, dense buffers "
                      "(Backend::strided_bindings() is false)");
    // A buffer bound twice keeps the array its first binding took.
    bool seen = false;
    for (int q = 0; q < p; ++q) seen |= launch.params[q].buffer() == b.buffer();
    TPU_ASSIGN_OR_RETURN(args[p], ArrayFor(b.buffer(), ArrayTypeOf(g.params[p]), !seen, &temps.v));
    // Donation is safe only when the donated buffer is the result's own and bound once.
    int r = p < static_cast<int>(program.aliased.size()) ? program.aliased[p] : -1;
    if (r >= 0) {
      bool ok = launch.results[r].buffer() == b.buffer();
      for (int q = 0; q < np && ok; ++q) ok = q == p || launch.params[q].buffer() != b.buffer();
      if (!ok) non_donatable.push_back(p);
    }
  }
  for (size_t r = 0; r < launch.results.size(); ++r) {
    const Binding& b = launch.results[r];
    if (!b.CoversBuffer())
      return Internal("result " + std::to_string(r) + " of " + exe->name() +
                      " binds part of a buffer: the PJRT backend writes whole, dense buffers");
    if (b.type() != g.TypeOf(g.results[r]))
      return Internal("result " + std::to_string(r) + " of " + exe->name() + " does not match its type");
  }
  ArrayList outputs{api_, {}};
  std::sort(non_donatable.begin(), non_donatable.end());
  TPU_RETURN_IF_ERROR(Execute(*exe, args, non_donatable, &outputs.v));
  if (!program.checks.empty()) {
    // Note [Checked indices on PJRT]: (min, max) per index check, a flag per check op, after
    // the program's own results.
    size_t slots = 0;
    for (const IndexCheck& c : program.checks) slots += c.check_kind >= 0 ? 1 : 2;
    std::vector<int64_t> bounds(slots);
    TPU_RETURN_IF_ERROR(Download(api_, outputs.v.back(), bounds.data(), static_cast<int64_t>(bounds.size() * 8)));
    size_t at = 0;
    for (const IndexCheck& c : program.checks) {
      if (c.check_kind >= 0) {
        if (bounds[at++] == 1) continue;
        report->failed_op = c.op;
        return InvalidArgument(c.message);
      }
      int64_t lo = bounds[at], hi = bounds[at + 1];
      at += 2;
      if (lo >= 0 && hi <= c.max_start) continue;
      report->failed_op = c.op;
      return OutOfRange("index " + std::to_string(lo < 0 ? lo : hi) + " is out of bounds for dimension " +
                        std::to_string(c.dim) + " with size " + std::to_string(c.size));
    }
  }
  for (size_t r = 0; r < launch.results.size(); ++r) {
    Replace(launch.results[r].buffer(), outputs.v[r]);
    outputs.v[r] = nullptr;
  }
  return Status::Ok();
}

Status PjrtExecutor::ReadAll(Buffer* b, std::vector<char>* out) {
  out->assign(static_cast<size_t>(b->nbytes()), 0);
  PJRT_Buffer* cur = PjrtBufferOf(b);
  if (!cur || b->nbytes() == 0) return Status::Ok();  // never written: zeros
  return Download(api_, cur, out->data(), b->nbytes());
}

Status PjrtExecutor::Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes) {
  if (offset < 0 || nbytes < 0 || offset + nbytes > dst->nbytes())
    return Internal("write past the end of a device buffer");
  if (nbytes == 0) return Status::Ok();
  // The new array keeps the type the buffer's had (programs bind a buffer with one type, as a
  // rule); a buffer never written gets bytes.
  PJRT_Buffer* cur = PjrtBufferOf(dst);
  StatusOr<ArrayType> type =
      cur ? TypeOf(api_, cur) : StatusOr<ArrayType>(ArrayType{PJRT_Buffer_Type_U8, {dst->nbytes()}});
  if (!type.ok()) return type.status();
  const void* data = src;
  std::vector<char> whole;
  if (offset != 0 || nbytes != dst->nbytes()) {
    TPU_RETURN_IF_ERROR(ReadAll(dst, &whole));
    std::memcpy(whole.data() + offset, src, static_cast<size_t>(nbytes));
    data = whole.data();
  }
  TPU_ASSIGN_OR_RETURN(PJRT_Buffer * made,
                       Upload(api_, client_->get(), device_, data, type.value().type, type.value().dims));
  Replace(dst, made);
  return Status::Ok();
}

Status PjrtExecutor::Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) {
  if (offset < 0 || nbytes < 0 || offset + nbytes > src->nbytes())
    return Internal("read past the end of a device buffer");
  std::lock_guard<std::mutex> lock(contents_mu_);
  PJRT_Buffer* cur = PjrtBufferOf(src);
  if (!cur) {
    std::memset(dst, 0, static_cast<size_t>(nbytes));  // never written
    return Status::Ok();
  }
  if (offset == 0 && nbytes == src->nbytes()) return Download(api_, cur, dst, nbytes);
  std::vector<char> whole(static_cast<size_t>(src->nbytes()));
  TPU_RETURN_IF_ERROR(Download(api_, cur, whole.data(), src->nbytes()));
  std::memcpy(dst, whole.data() + offset, static_cast<size_t>(nbytes));
  return Status::Ok();
}

Status PjrtExecutor::Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes) {
  if (src_offset < 0 || nbytes < 0 || src_offset + nbytes > src->nbytes() || dst_offset < 0 ||
      dst_offset + nbytes > dst->nbytes())
    return Internal("copy past the end of a device buffer");
  if (nbytes == 0 || (src == dst && src_offset == dst_offset)) return Status::Ok();
  bool whole = src_offset == 0 && dst_offset == 0 && nbytes == src->nbytes() && nbytes == dst->nbytes();
  PJRT_Buffer* cur = PjrtBufferOf(src);
  if (whole && !cur) {
    Replace(dst, nullptr);  // the copy of a never-written buffer reads as zeros too
    return Status::Ok();
  }
  if (whole && TPU_PJRT_HAS(api_, PJRT_Buffer_CopyToDevice)) {
    auto args = TPU_PJRT_ARGS(PJRT_Buffer_CopyToDevice_Args);
    args.buffer = cur;
    args.dst_device = device_;
    TPU_RETURN_IF_ERROR(api_.ToStatus(api_->PJRT_Buffer_CopyToDevice(&args), "PJRT_Buffer_CopyToDevice"));
    Replace(dst, args.dst_buffer);
    return Status::Ok();
  }
  std::vector<char> bytes(static_cast<size_t>(nbytes));
  {
    std::vector<char> all;
    TPU_RETURN_IF_ERROR(ReadAll(src, &all));
    std::memcpy(bytes.data(), all.data() + src_offset, static_cast<size_t>(nbytes));
  }
  return Write(dst, dst_offset, bytes.data(), nbytes);
}

}  // namespace tpu::pjrt
