// dot_general: operands are viewed as [batch, M, K] x [batch, K, N] (a copy only when a group of
// dims cannot be flattened as a view) and handed to oneDNN's matmul with their strides, so a
// transposed weight is read in place. Primitives are cached by shape, strides and types (a bounded
// LRU; its lock is not held while a primitive runs). float64 and integer products, which oneDNN's
// matmul does not cover, go to BatchedGemm (dot_blas.cc: OpenBLAS and a blocked integer loop);
// bfloat16/float16 on a CPU without oneDNN kernels for them run through float32 (Note [bf16
// without AVX-512]).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

#include "base/hash.h"
#include "base/thread_pool.h"
#include "runtime/host/dot_blas.h"
#include "runtime/host/kernels.h"
#include "runtime/host/lru_cache.h"
#include "runtime/host/onednn_threads.h"

namespace tpu::host {
namespace {

struct Flat {
  int64_t size = 1;
  int64_t stride = 1;
};

// Flattens dims `group` (in order) of v into one dim, if the layout allows it.
std::optional<Flat> FlattenGroup(const View& v, const Dims& group) {
  Flat f;
  bool have = false;
  int64_t expect = 0;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    int64_t d = *it;
    if (v.dims[d] == 1) continue;
    if (!have) {
      f.stride = v.strides[d];
      expect = v.strides[d] * v.dims[d];
      have = true;
    } else {
      if (v.strides[d] != expect) return std::nullopt;
      expect *= v.dims[d];
    }
    f.size *= v.dims[d];
  }
  if (f.size > 1 && f.stride == 0) return std::nullopt;  // broadcast: oneDNN wants real strides
  return f;
}

struct Operand3 {
  Flat b, m, k;  // for rhs: b, k, n (m holds N)
};

Dims FreeDims(int rank, const Dims& batch, const Dims& contract) {
  Dims free;
  for (int d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contract.begin(), contract.end(), d) == contract.end())
      free.push_back(d);
  return free;
}

// Makes `v` flattenable: if a group cannot be flattened, copies v contiguously in group order.
View Canonical(const View& v, const Dims& g0, const Dims& g1,
               const Dims& g2, std::vector<char>& storage, Operand3* out) {
  auto a = FlattenGroup(v, g0), b = FlattenGroup(v, g1), c = FlattenGroup(v, g2);
  if (a && b && c) {
    *out = {*a, *b, *c};
    return v;
  }
  Dims perm;
  for (auto* g : {&g0, &g1, &g2}) perm.insert(perm.end(), g->begin(), g->end());
  View src = v;
  src.dims.clear();
  src.strides.clear();
  for (int64_t p : perm) {
    src.dims.push_back(v.dims[p]);
    src.strides.push_back(v.strides[p]);
  }
  View dst{nullptr, v.dtype, src.dims, ContiguousStrides(src.dims)};
  storage.resize(std::max<int64_t>(1, dst.NumElements()) * DTypeSize(v.dtype));
  dst.data = storage.data();
  (void)CopyView(src, dst);
  int64_t n0 = static_cast<int64_t>(g0.size()), n1 = static_cast<int64_t>(g1.size());
  Dims h0, h1, h2;
  for (int64_t i = 0; i < static_cast<int64_t>(perm.size()); ++i)
    (i < n0 ? h0 : (i < n0 + n1 ? h1 : h2)).push_back(i);
  *out = {*FlattenGroup(dst, h0), *FlattenGroup(dst, h1), *FlattenGroup(dst, h2)};
  return dst;
}

dnnl::memory::data_type DnnlType(DType t) {
  switch (t) {
    case DType::kF32: return dnnl::memory::data_type::f32;
    case DType::kBF16: return dnnl::memory::data_type::bf16;
    case DType::kF16: return dnnl::memory::data_type::f16;
    default: return dnnl::memory::data_type::undef;
  }
}

// A matmul primitive with its memory objects and argument map, built once per problem: a call
// only swaps in the data pointers (building them per call cost more than a tiny product). The
// prebuilt memory objects belong to whichever call holds `in_use`; a concurrent call of the same
// problem (another virtual device) builds its own. Created with a user scratchpad
// (onednn_threads.h): any thread may run it.
struct MatmulEntry {
  bool native = false;  // false: oneDNN has no kernel for these types on this CPU
  dnnl::matmul prim;
  dnnl::memory::desc amd, bmd, cmd, scratch;
  std::mutex in_use;
  dnnl::memory a, b, c;
  std::unordered_map<int, dnnl::memory> args;
};

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 0x646f74ULL;
    for (int64_t v : k) h = HashMix(h, static_cast<uint64_t>(v));
    return static_cast<size_t>(h);
  }
};

// Bounded: an eager program's shapes vary (a growing sequence, ragged batches), so an unbounded
// cache grows with every new shape.
constexpr size_t kMatmulCacheEntries = 512;

struct Engine {
  dnnl::engine engine = CpuEngine();
  LruCache<std::vector<int64_t>, MatmulEntry, KeyHash> cache{kMatmulCacheEntries};
};

Engine& GetEngine() {
  static Engine* e = new Engine();
  return *e;
}

// One [nb, m, k] x [nb, k, n] -> contiguous [nb, m, n] product; strides in elements.
struct MatmulProblem {
  int64_t nb, m, k, n;
  dnnl::memory::dims astr, bstr;
  dnnl::memory::data_type dt, odt;
  dnnl::memory::dims cstr;  // empty: contiguous [nb, m, n]
};

// Runs the product with oneDNN on this thread (its primitive cached per problem). False when
// oneDNN has no kernel for these types on this CPU; that answer is cached too.
StatusOr<bool> RunMatmulHere(const MatmulProblem& p, void* a, void* b, void* c) {
  using md = dnnl::memory::desc;
  OneDnnOnThisThread one;
  dnnl::memory::dims adims = {p.nb, p.m, p.k}, bdims = {p.nb, p.k, p.n}, cdims = {p.nb, p.m, p.n};
  dnnl::memory::dims cstr = p.cstr.empty() ? dnnl::memory::dims{p.m * p.n, p.n, 1} : p.cstr;
  dnnl::memory::dims astr = p.astr, bstr = p.bstr;
  if (p.nb == 1) {
    // Note [Batch stride of one matrix]: a batch of one addresses no second matrix, but oneDNN
    // (2.6) takes a batch stride other than the matrix's own span for a strided layout and then
    // passes over its brgemm kernels (AMX for bfloat16: a part of a split product, whose batch
    // strides are the whole product's, ran 3x slower than the whole on one thread). The stride
    // becomes the span.
    auto span = [](const dnnl::memory::dims& st, int64_t d1, int64_t d2) {
      return std::max<int64_t>({1, d1 * st[1], d2 * st[2]});
    };
    astr[0] = span(astr, p.m, p.k), bstr[0] = span(bstr, p.k, p.n), cstr[0] = span(cstr, p.m, p.n);
  }
  std::vector<int64_t> exact = {p.nb,    p.m,     p.k,     p.n,     astr[0], astr[1], astr[2],
                                bstr[0], bstr[1], bstr[2], cstr[0], cstr[1], cstr[2],
                                static_cast<int64_t>(p.dt), static_cast<int64_t>(p.odt)};
  Engine& e = GetEngine();
  std::shared_ptr<MatmulEntry> entry = e.cache.Find(exact);
  if (!entry) {
    auto made = std::make_shared<MatmulEntry>();
    try {
      made->amd = md(adims, p.dt, astr);
      made->bmd = md(bdims, p.dt, bstr);
      made->cmd = md(cdims, p.odt, cstr);
      dnnl::matmul::desc desc(made->amd, made->bmd, made->cmd);
      dnnl::matmul::primitive_desc pd(desc, UserScratchpad(), e.engine);
      made->scratch = pd.scratchpad_desc();
      made->prim = dnnl::matmul(pd);
      made->a = dnnl::memory(made->amd, e.engine, DNNL_MEMORY_NONE);
      made->b = dnnl::memory(made->bmd, e.engine, DNNL_MEMORY_NONE);
      made->c = dnnl::memory(made->cmd, e.engine, DNNL_MEMORY_NONE);
      made->args = {{DNNL_ARG_SRC, made->a}, {DNNL_ARG_WEIGHTS, made->b}, {DNNL_ARG_DST, made->c}};
      made->native = true;
    } catch (const dnnl::error& err) {
      // For reduced precision: no kernel on this CPU (the caller computes in float32, where a
      // problem oneDNN rejects for another reason fails with its message).
      bool reduced = p.dt != dnnl::memory::data_type::f32 || p.odt != dnnl::memory::data_type::f32;
      if (!reduced) return Internal(std::string("oneDNN matmul creation failed: ") + err.what());
    }
    entry = e.cache.Insert(exact, std::move(made));
  }
  if (!entry->native) return false;
  dnnl::stream& stream = ThreadStream();
  std::unique_lock<std::mutex> mine(entry->in_use, std::try_to_lock);
  const char* no_scratch = "out of host memory for oneDNN's matmul scratchpad";
  try {
    if (mine.owns_lock()) {
      entry->a.set_data_handle(a);
      entry->b.set_data_handle(b);
      entry->c.set_data_handle(c);
      if (!AddThreadScratchpad(entry->scratch, e.engine, entry->args)) return ResourceExhausted(no_scratch);
      entry->prim.execute(stream, entry->args);
    } else {
      dnnl::memory am(entry->amd, e.engine, a), bm(entry->bmd, e.engine, b), cm(entry->cmd, e.engine, c);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
      if (!AddThreadScratchpad(entry->scratch, e.engine, args)) return ResourceExhausted(no_scratch);
      entry->prim.execute(stream, args);
    }
    stream.wait();
  } catch (const dnnl::error& err) {
    return Internal(std::string("oneDNN matmul failed: ") + err.what());
  }
  return true;
}

// Products below this many multiply-adds run on the calling thread: ~10-20 us of work on one
// core, about what waking the pool and waiting for it costs.
constexpr int64_t kSplitMacs = int64_t{1} << 20;

// Runs the product, split over the pool (Note [oneDNN on one thread]): each thread multiplies
// whole matrices of the batch, or a block of rows, or a block of columns (strided views of the
// same operands), with a primitive for its part; equal parts share one primitive.
StatusOr<bool> RunMatmul(const MatmulProblem& p, void* a, void* b, void* c) {
  ThreadPool& pool = ThreadPool::Get();
  int threads = pool.num_threads();
  if (threads <= 1 || p.nb * p.m * p.n * p.k < kSplitMacs) return RunMatmulHere(p, a, b, c);
  // Which dim to split, and the smallest part worth a primitive call: whole matrices, blocks of
  // 8 rows, blocks of 64 columns (oneDNN's kernels work on such blocks).
  int dim;  // 0: batch, 1: rows, 2: columns
  int64_t extent, unit;
  if (p.nb >= threads) {
    dim = 0, extent = p.nb, unit = 1;
  } else if (p.m >= 8 * threads) {
    dim = 1, extent = p.m, unit = 8;
  } else if (p.n >= 64 * threads) {
    dim = 2, extent = p.n, unit = 64;
  } else {
    return RunMatmulHere(p, a, b, c);
  }
  int64_t units = (extent + unit - 1) / unit;
  int64_t parts = std::min<int64_t>(threads, units);
  int64_t per = (units + parts - 1) / parts * unit;  // elements of the split dim per part
  parts = (extent + per - 1) / per;
  const int64_t esize = dnnl::memory::data_type_size(p.dt), osize = dnnl::memory::data_type_size(p.odt);
  std::mutex mu;
  Status failed;
  bool native = true;
  pool.ParallelFor(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t lo = i * per, len = std::min(per, extent - lo);
      MatmulProblem q = p;
      char* qa = static_cast<char*>(a);
      char* qb = static_cast<char*>(b);
      char* qc = static_cast<char*>(c);
      if (dim == 0) {
        q.nb = len;
        qa += lo * p.astr[0] * esize, qb += lo * p.bstr[0] * esize, qc += lo * p.m * p.n * osize;
      } else if (dim == 1) {
        q.m = len;
        qa += lo * p.astr[1] * esize, qc += lo * p.n * osize;
      } else {
        q.n = len;
        qb += lo * p.bstr[2] * esize, qc += lo * osize;
      }
      // The output stays [nb, m, n] contiguous in the whole: a part's rows are p.n apart.
      q.cstr = {p.m * p.n, p.n, 1};
      StatusOr<bool> ran = RunMatmulHere(q, qa, qb, qc);
      std::lock_guard<std::mutex> lock(mu);
      if (!ran.ok()) {
        if (failed.ok()) failed = ran.status();
      } else if (!*ran) {
        native = false;
      }
    }
  });
  if (!failed.ok()) return failed;
  return native;
}

}  // namespace

Status RunDotGeneral(const Op& op, const View& lhs, const View& rhs, const View& out) {
  const Attrs& a = op.attrs;
  int lr = static_cast<int>(lhs.dims.size()), rr = static_cast<int>(rhs.dims.size());
  Dims lfree = FreeDims(lr, a.a, a.c), rfree = FreeDims(rr, a.b, a.d);
  std::vector<char> ls, rs;
  Operand3 A, B;
  View L = Canonical(lhs, a.a, lfree, a.c, ls, &A);
  View R = Canonical(rhs, a.b, a.d, rfree, rs, &B);
  // For rhs the groups are (batch, contract, free): B.m holds K and B.k holds N; swap to name them.
  std::swap(B.m, B.k);  // now B.k = K group, B.m = N group
  int64_t nb = A.b.size, m = A.m.size, k = A.k.size, n = B.m.size;
  if (out.NumElements() == 0) return Status::Ok();
  if (k == 0) {
    std::memset(out.data, 0, out.NumElements() * DTypeSize(out.dtype));
    return Status::Ok();
  }
  DType t = lhs.dtype;
  if (rhs.dtype != t) return Internal("dot_general operand types differ");
  auto dt = DnnlType(t);
  auto odt = DnnlType(out.dtype);
  dnnl::memory::dims astr = {nb == 1 ? m * k : A.b.stride, m == 1 ? k : A.m.stride, k == 1 ? 1 : A.k.stride};
  dnnl::memory::dims bstr = {nb == 1 ? k * n : B.b.stride, k == 1 ? n : B.k.stride, n == 1 ? 1 : B.m.stride};
  View O{out.data, out.dtype, {nb, m, n}, ContiguousStrides({nb, m, n})};
  if (dt == dnnl::memory::data_type::undef || odt == dnnl::memory::data_type::undef) {
    StridedMats sa{L.data, A.b.stride, A.m.stride, A.k.stride};
    StridedMats sb{R.data, B.b.stride, B.k.stride, B.m.stride};
    if (out.dtype == t) return BatchedGemm(t, sa, sb, out.data, nb, m, n, k);
    // A result of another type (int8 operands into an int32 result, float64 into float32): the
    // product in 64 bits (exact for integers until it wraps at 64), then converted.
    DType acc = IsFloat(t) ? DType::kF64 : DType::kI64;
    View Lv{L.data, t, {nb, m, k}, {astr[0], astr[1], astr[2]}};
    View Rv{R.data, t, {nb, k, n}, {bstr[0], bstr[1], bstr[2]}};
    std::vector<char> la, ra, oa(static_cast<size_t>(nb * m * n) * 8);
    View La = Materialize(Lv, {0, 1, 2}, acc, la), Ra = Materialize(Rv, {0, 1, 2}, acc, ra);
    TPU_RETURN_IF_ERROR(BatchedGemm(acc, StridedMats{La.data, m * k, k, 1}, StridedMats{Ra.data, k * n, n, 1},
                                    oa.data(), nb, m, n, k));
    return CopyView(View{oa.data(), acc, O.dims, O.strides}, O);
  }
  MatmulProblem p{nb, m, k, n, astr, bstr, dt, odt, {}};
  TPU_ASSIGN_OR_RETURN(bool ran, RunMatmul(p, L.data, R.data, out.data));
  if (ran) return Status::Ok();
  // Note [bf16 without AVX-512]: oneDNN's bf16/f16 matmul needs AVX-512 (or AMX); on older
  // x86-64 CPUs (and with ONEDNN_MAX_CPU_ISA=AVX2) it has no kernel. The operands are converted
  // to float32 (exact), multiplied by the float32 kernel -- which accumulates in float32, as the
  // bf16 kernels do -- and the result is rounded once to its type: at least as accurate.
  View Lv{L.data, t, {nb, m, k}, {astr[0], astr[1], astr[2]}};
  View Rv{R.data, t, {nb, k, n}, {bstr[0], bstr[1], bstr[2]}};
  std::vector<char> lf, rf, of;
  View L32 = Materialize(Lv, {0, 1, 2}, DType::kF32, lf), R32 = Materialize(Rv, {0, 1, 2}, DType::kF32, rf);
  View O32 = O;
  if (out.dtype != DType::kF32) {
    of.resize(static_cast<size_t>(nb * m * n) * 4);
    O32 = View{of.data(), DType::kF32, O.dims, O.strides};
  }
  auto f32 = dnnl::memory::data_type::f32;
  MatmulProblem p32{nb, m, k, n, {m * k, k, 1}, {k * n, n, 1}, f32, f32, {}};
  TPU_ASSIGN_OR_RETURN(ran, RunMatmul(p32, L32.data, R32.data, O32.data));
  if (!ran) return Internal("oneDNN has no float32 matmul for this CPU");
  return O32.data == O.data ? Status::Ok() : CopyView(O32, O);
}

}  // namespace tpu::host
