// convolution: a StableHLO convolution is mapped onto one of oneDNN's three convolution
// primitives, which between them cover what autodiff emits:
//   - no lhs dilation, batch_group_count 1: the forward primitive (feature groups = oneDNN groups);
//     when the output is smaller than the kernel (the weight gradient of a convolution, written as
//     a forward convolution of input and output gradient, as XLA does) the same problem is run
//     as its dual, the backward-weights primitive, which is what it is;
//   - batch_group_count > 1: backward-weights with groups (the weight gradient of a grouped
//     convolution);
//   - lhs dilation with unit window strides: backward-data (the input gradient, or a transposed
//     convolution), with the kernel reversed back and its feature dims swapped (a small copy).
// Small float32 problems run as one matrix product instead (Note [Small convolutions]). Anything
// else (float64, integers, other attribute mixes) runs the reference loops. Activations in
// a channels-last layout (NHWC, NWC, NDHWC views) are given to the primitive as they are, so they
// run channels-last end to end with no reorder; other layouts (and the weights) use format "any"
// (oneDNN's blocked layouts) fed by reorders from/to the strided views. Primitives are cached by
// shape, strides and types in a bounded LRU whose lock is not held while they run. bfloat16/float16
// run natively where oneDNN has a kernel for this CPU, else through float32 (the reorders convert).
//
// Note [Weight reorders]: the reordered (blocked) weights are not kept between calls. A kernel sees
// only a View (pointer, dims, strides): the same pointer holds new values after every optimizer
// step, written in place, and nothing in the View says so; hashing the weights to detect a change
// reads them once, as the reorder itself does. A sound cache needs a version from the runtime (a
// counter on the Buffer, bumped by every launch or copy that writes it, carried into the View).
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <cblas.h>

#include "base/hash.h"
#include "base/thread_pool.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/host/conv_util.h"
#include "runtime/host/dot_blas.h"
#include "runtime/host/lru_cache.h"
#include "runtime/host/onednn_threads.h"

namespace tpu::host {
namespace {

using dims_t = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

enum class Path : int { kForward, kBackwardData, kBackwardWeights };

// oneDNN's problem: operands by their forward roles. The output is dst (forward), src
// (backward-data) or wei (backward-weights).
struct Problem {
  Path path;
  View src, wei, dst;  // wei is 5-d/6-d/... ([G, OC/G, IC/G, k...]) when grouped
  dims_t strides, dilates, pad_l, pad_r;
  int out_role() const { return path == Path::kForward ? 2 : path == Path::kBackwardData ? 0 : 1; }
};

char* Offset(void* p, int64_t elements, DType t) {
  return static_cast<char*>(p) + elements * DTypeSize(t);
}

// [O, X, rest...] -> [G, O/G, X, rest...]
View Grouped(const View& v, int64_t g) {
  View r = v;
  r.dims.clear();
  r.strides.clear();
  r.dims.push_back(g);
  r.strides.push_back(v.dims[0] / g * v.strides[0]);
  for (size_t d = 0; d < v.dims.size(); ++d) {
    r.dims.push_back(d == 0 ? v.dims[0] / g : v.dims[d]);
    r.strides.push_back(v.strides[d]);
  }
  return r;
}

View Swap01(const View& v) {
  Dims rest;
  for (size_t d = 2; d < v.dims.size(); ++d) rest.push_back(static_cast<int64_t>(d));
  return Permuted(v, 1, 0, rest);
}

// v's elements set to zero: one memset when they are a dense block in any order (an output
// written in place, a permuted weight gradient), else a copy from a broadcast zero.
void ZeroFill(const View& v) {
  const char *lo, *hi;
  ViewExtent(v, &lo, &hi);
  bool dense = hi - lo == v.NumElements() * static_cast<int64_t>(DTypeSize(v.dtype));
  for (size_t d = 0; d < v.dims.size() && dense; ++d) dense = v.dims[d] == 1 || v.strides[d] != 0;
  if (dense) {
    std::memset(const_cast<char*>(lo), 0, static_cast<size_t>(hi - lo));
    return;
  }
  double zero = 0;
  View src{&zero, DType::kF64, v.dims, Dims(v.dims.size(), 0)};
  (void)CopyView(src, v);
}

int64_t SpatialSize(const View& v) {
  int64_t n = 1;
  for (size_t d = 2; d < v.dims.size(); ++d) n *= v.dims[d];
  return n;
}

// A negative padding crops: drops -lo leading / -hi trailing elements of `v` along `dim` and
// leaves that side's padding at 0.
void CropNegativePadding(View& v, int dim, int64_t& lo, int64_t& hi) {
  if (lo < 0) {
    v.data = Offset(v.data, -lo * v.strides[dim], v.dtype);
    v.dims[dim] += lo;
    lo = 0;
  }
  if (hi < 0) {
    v.dims[dim] += hi;
    hi = 0;
  }
}

// Clips negative padding into the lhs view and drops the lhs tail no window reaches, so that
// the padded extent is exactly what the output needs (oneDNN wants consistent sizes).
bool FitLhs(const ConvolutionSpec& s, View& L, const View& R, const View& Y, dims_t& pl,
            dims_t& pr) {
  int n = s.spatial_rank();
  for (int d = 0; d < n; ++d) {
    int64_t lo = s.padding_low[d], hi = s.padding_high[d], k = R.dims[2 + d];
    int64_t ext = (k - 1) * s.rhs_dilation[d] + 1, st = s.window_strides[d];
    int64_t& len = L.dims[2 + d];
    CropNegativePadding(L, 2 + d, lo, hi);
    int64_t span = len + lo + hi - ext;
    if (len <= 0 || span < 0) return false;
    hi -= span % st;
    if (hi < 0) {
      len += hi;
      hi = 0;
    }
    if (len <= 0 || span / st + 1 != Y.dims[2 + d]) return false;
    pl.push_back(lo);
    pr.push_back(hi);
  }
  return true;
}

// Fills `p` for oneDNN, or returns false for the reference loops. May write zeros into `Y`
// (output elements no window reaches) and the reversed kernel into `wstore`.
bool PlanProblem(const ConvolutionSpec& s, View L, View R, View Y, Problem* p,
                 std::vector<char>& wstore) {
  int n = s.spatial_rank();
  if (n < 1 || n > 3) return false;
  bool lhs_dilated = false, unit_strides = true;
  for (int d = 0; d < n; ++d) {
    lhs_dilated |= s.lhs_dilation[d] > 1;
    unit_strides &= s.window_strides[d] == 1;
  }
  int64_t fgc = s.feature_group_count, bgc = s.batch_group_count;
  p->strides.clear();
  p->dilates.clear();
  p->pad_l.clear();
  p->pad_r.clear();
  if (!lhs_dilated) {
    if (!FitLhs(s, L, R, Y, p->pad_l, p->pad_r)) return false;
    if (bgc > 1 || (fgc == 1 && SpatialSize(Y) < SpatialSize(R))) {
      // The dual problem: lhs batch <-> oneDNN channels, lhs features <-> oneDNN batch, the
      // kernel is the output gradient and the output the weight gradient.
      p->path = Path::kBackwardWeights;
      p->src = Swap01(L);
      p->dst = Swap01(R);
      View w = Swap01(Y);  // [O, B/bgc, spatial]
      p->wei = bgc > 1 ? Grouped(w, bgc) : w;
      for (int d = 0; d < n; ++d) {
        p->strides.push_back(s.rhs_dilation[d]);
        p->dilates.push_back(s.window_strides[d] - 1);
      }
      return true;
    }
    p->path = Path::kForward;
    p->src = L;
    p->wei = fgc > 1 ? Grouped(R, fgc) : R;
    p->dst = Y;
    for (int d = 0; d < n; ++d) {
      p->strides.push_back(s.window_strides[d]);
      p->dilates.push_back(s.rhs_dilation[d] - 1);
    }
    return true;
  }
  if (!unit_strides || bgc > 1) return false;
  // Backward-data of the forward convolution whose output is the lhs: its strides are the lhs
  // dilation, its padding what makes the windows line up, its kernel the rhs reversed with the
  // feature dims swapped: wf[g][f][o][k] = rhs[g * O/G + o][f][K - 1 - k].
  p->path = Path::kBackwardData;
  bool zeroed = false;
  for (int d = 0; d < n; ++d) {
    int64_t ext = (R.dims[2 + d] - 1) * s.rhs_dilation[d];
    int64_t lo = ext - s.padding_low[d], hi = ext - s.padding_high[d];
    int64_t& len = Y.dims[2 + d];
    if ((lo < 0 || hi < 0) && !zeroed) {  // output rows no window reaches are zero
      ZeroFill(Y);
      zeroed = true;
    }
    CropNegativePadding(Y, 2 + d, lo, hi);
    if (len <= 0) return false;
    if (len + lo + hi - ext - 1 != (L.dims[2 + d] - 1) * s.lhs_dilation[d]) return false;
    p->pad_l.push_back(lo);
    p->pad_r.push_back(hi);
    p->strides.push_back(s.lhs_dilation[d]);
    p->dilates.push_back(s.rhs_dilation[d] - 1);
  }
  int64_t G = fgc;
  View rev = Grouped(R, G);        // [G, O/G, I, k...]
  rev = Permuted(rev, 0, 2, [&] {  // [G, I, O/G, k...]
    Dims rest{1};
    for (int d = 0; d < n; ++d) rest.push_back(3 + d);
    return rest;
  }());
  for (int d = 0; d < n; ++d) {
    int64_t k = rev.dims[3 + d];
    if (k == 0) return false;
    rev.data = Offset(rev.data, (k - 1) * rev.strides[3 + d], rev.dtype);
    rev.strides[3 + d] = -rev.strides[3 + d];
  }
  View w = Contiguous(rev, R.dtype, wstore);
  if (G == 1) {  // drop the group dim
    w.dims.erase(w.dims.begin());
    w.strides.erase(w.strides.begin());
  }
  p->src = Y;
  p->wei = w;
  p->dst = L;
  return true;
}

dt DnnlType(DType t) {
  switch (t) {
    case DType::kF32:
      return dt::f32;
    case DType::kBF16:
      return dt::bf16;
    case DType::kF16:
      return dt::f16;
    default:
      return dt::undef;
  }
}

// A view as a oneDNN memory descriptor; strides of unit dims are made dense so oneDNN can
// recognise plain layouts.
dnnl::memory::desc UserDesc(const View& v) {
  dims_t dims(v.dims.begin(), v.dims.end()), strides(v.strides.begin(), v.strides.end());
  int64_t dense = 1;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (dims[d] == 1) strides[d] = dense;
    dense = std::max(dense, strides[d] * dims[d]);
  }
  return dnnl::memory::desc(dims, DnnlType(v.dtype), strides);
}

// Views oneDNN can address: positive strides on every dim with more than one element, and no
// holes (the elements fill the span the strides reach: a permutation of a dense layout). A view
// with holes -- the real or imaginary part of complex storage, which ATen's complex convolution
// hands over, a slice with a step -- made oneDNN fail at execution, and is copied instead.
bool Addressable(const View& v) {
  int64_t span = 1;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    if (v.dims[d] > 1 && v.strides[d] <= 0) return false;
    if (v.dims[d] > 1) span += (v.dims[d] - 1) * v.strides[d];
  }
  return DnnlType(v.dtype) != dt::undef && span == v.NumElements();
}

// A cached problem: created with user scratchpads (onednn_threads.h), so any thread may run it.
struct Entry {
  dnnl::primitive prim;
  dnnl::memory::desc scratch;
  dnnl::memory::desc user[3], inner[3];  // src, wei, dst
  std::optional<dnnl::reorder> reorder[3];
  dnnl::memory::desc reorder_scratch[3];
};

// A dense channels-last view (NWC, NHWC, NDHWC) of oneDNN data type `t`, as the descriptor
// oneDNN's own tag gives: the layout its direct convolutions run on without a reorder.
std::optional<dnnl::memory::desc> ChannelsLast(const View& v, dt t) {
  using tag = dnnl::memory::format_tag;
  if (DnnlType(v.dtype) != t) return std::nullopt;
  tag k = v.dims.size() == 3 ? tag::nwc : v.dims.size() == 4 ? tag::nhwc : v.dims.size() == 5 ? tag::ndhwc : tag::undef;
  if (k == tag::undef || v.dims[1] == 1) return std::nullopt;
  dnnl::memory::desc want(dims_t(v.dims.begin(), v.dims.end()), t, k);
  if (!(UserDesc(v) == want)) return std::nullopt;
  return want;
}

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 0x636f6e76ULL;
    for (int64_t v : k) h = HashMix(h, static_cast<uint64_t>(v));
    return static_cast<size_t>(h);
  }
};

constexpr size_t kConvCacheEntries = 256;  // bounded: eager shapes vary

struct Engine {
  dnnl::engine engine = CpuEngine();
  LruCache<std::vector<int64_t>, Entry, KeyHash> cache{kConvCacheEntries};
};

Engine& GetEngine() {
  static Engine* e = new Engine();
  return *e;
}

// The exact problem (the cache compares it whole: no hash collisions).
std::vector<int64_t> Key(const Problem& p) {
  std::vector<int64_t> k{static_cast<int64_t>(p.path)};
  for (const View* v : {&p.src, &p.wei, &p.dst}) {
    k.push_back(static_cast<int64_t>(v->dtype));
    k.push_back(static_cast<int64_t>(v->dims.size()));
    for (size_t d = 0; d < v->dims.size(); ++d) {
      k.push_back(v->dims[d]);
      k.push_back(v->dims[d] == 1 ? 0 : v->strides[d]);
    }
  }
  for (const dims_t* v : {&p.strides, &p.dilates, &p.pad_l, &p.pad_r}) k.insert(k.end(), v->begin(), v->end());
  return k;
}

// oneDNN's reference implementation: what it falls back to when no optimized kernel takes the
// layouts asked for (much slower than an optimized kernel plus reorders).
bool IsReference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

// The primitive computing in `ct` (the output in float32 when the output view is float32).
// With `channels_last`, activations already in a channels-last layout are used as they are; null
// when that leaves only oneDNN's reference kernel.
std::shared_ptr<Entry> Create(const Problem& p, dt ct, const dnnl::engine& eng, bool channels_last) {
  using md = dnnl::memory::desc;
  using tag = dnnl::memory::format_tag;
  auto e = std::make_shared<Entry>();
  const View* views[3] = {&p.src, &p.wei, &p.dst};
  md any[3];
  for (int r = 0; r < 3; ++r) {
    e->user[r] = UserDesc(*views[r]);
    dt t = (r == p.out_role() && views[r]->dtype == DType::kF32) ? dt::f32 : ct;
    any[r] = md(dims_t(views[r]->dims.begin(), views[r]->dims.end()), t, tag::any);
    // Both activations channels-last, or neither: oneDNN's direct kernels do not mix it with
    // blocked layouts, and a channels-last -> plain reorder costs more than the blocked route's
    // two reorders. Role 1 is the weights (or the weight gradient): always "any".
    if (channels_last && r != 1) {
      auto cl = ChannelsLast(*views[r], t);
      if (!cl) return nullptr;
      any[r] = *cl;
    }
  }
  auto alg = dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, alg, any[0], any[1],
                                      any[2], p.strides, p.dilates, p.pad_l, p.pad_r);
  const dnnl::primitive_attr attr = UserScratchpad();
  dnnl::convolution_forward::primitive_desc fpd(fwd, attr, eng);
  if (p.path == Path::kForward) {
    if (channels_last && IsReference(fpd)) return nullptr;
    e->inner[0] = fpd.src_desc();
    e->inner[1] = fpd.weights_desc();
    e->inner[2] = fpd.dst_desc();
    e->scratch = fpd.scratchpad_desc();
    e->prim = dnnl::convolution_forward(fpd);
  } else if (p.path == Path::kBackwardData) {
    dnnl::convolution_backward_data::desc bwd(alg, any[0], any[1], any[2], p.strides, p.dilates,
                                              p.pad_l, p.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(bwd, attr, eng, fpd);
    if (channels_last && IsReference(pd)) return nullptr;
    e->inner[0] = pd.diff_src_desc();
    e->inner[1] = pd.weights_desc();
    e->inner[2] = pd.diff_dst_desc();
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::convolution_backward_data(pd);
  } else {
    dnnl::convolution_backward_weights::desc bwd(alg, any[0], any[1], any[2], p.strides, p.dilates,
                                                 p.pad_l, p.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(bwd, attr, eng, fpd);
    if (channels_last && IsReference(pd)) return nullptr;
    e->inner[0] = pd.src_desc();
    e->inner[1] = pd.diff_weights_desc();
    e->inner[2] = pd.diff_dst_desc();
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::convolution_backward_weights(pd);
  }
  for (int r = 0; r < 3; ++r) {
    if (e->inner[r] == e->user[r]) continue;
    bool out = r == p.out_role();
    auto rpd = out ? dnnl::reorder::primitive_desc(eng, e->inner[r], eng, e->user[r], attr)
                   : dnnl::reorder::primitive_desc(eng, e->user[r], eng, e->inner[r], attr);
    e->reorder_scratch[r] = rpd.scratchpad_desc();
    e->reorder[r] = dnnl::reorder(rpd);
  }
  return e;
}

std::shared_ptr<Entry> CreateAny(const Problem& p, dt ct, const dnnl::engine& eng) {
  // Channels-last activations first; oneDNN may have no kernel for a mixed layout: then "any".
  try {
    if (auto e = Create(p, ct, eng, true)) return e;
  } catch (const dnnl::error&) {
  }
  return Create(p, ct, eng, false);
}

// Runs the problem with oneDNN on this thread (Note [oneDNN on one thread]).
Status ExecuteHere(const Problem& p) {
  OneDnnOnThisThread one;
  Engine& eng = GetEngine();
  std::vector<int64_t> key = Key(p);
  std::shared_ptr<Entry> found = eng.cache.Find(key);
  if (!found) {
    DType in_t = p.path == Path::kBackwardData ? p.dst.dtype : p.src.dtype;
    std::shared_ptr<Entry> e;
    try {
      e = CreateAny(p, DnnlType(in_t), eng.engine);
    } catch (const dnnl::error& err) {
      // Unimplemented sends the problem to the reference loops.
      if (in_t == DType::kF32)
        return Unimplemented(std::string("oneDNN convolution: ") + err.what());
      // No kernel for this dtype on this CPU: compute in float32 (the reorders convert).
      try {
        e = CreateAny(p, dt::f32, eng.engine);
      } catch (const dnnl::error& err2) {
        return Unimplemented(std::string("oneDNN convolution: ") + err2.what());
      }
    }
    found = eng.cache.Insert(key, std::move(e));
  }
  dnnl::stream& stream = ThreadStream();
  const Entry& e = *found;
  const View* views[3] = {&p.src, &p.wei, &p.dst};
  static const int kArgs[3][3] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                                  {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
                                  {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST}};
  int out = p.out_role();
  std::unordered_map<int, dnnl::memory> args;
  dnnl::memory user[3], inner[3];
  auto no_scratch = [] { return ResourceExhausted("out of host memory for oneDNN's convolution scratchpad"); };
  // One reorder, with this thread's scratchpad (Note in onednn_threads.h).
  auto reorder = [&](int r, const dnnl::memory& from, const dnnl::memory& to) {
    std::unordered_map<int, dnnl::memory> rargs{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    if (!AddThreadScratchpad(e.reorder_scratch[r], eng.engine, rargs)) return false;
    e.reorder[r]->execute(stream, rargs);
    return true;
  };
  std::unique_ptr<void, FreeAligned> own[3];
  try {
    for (int r = 0; r < 3; ++r) {
      user[r] = dnnl::memory(e.user[r], eng.engine, views[r]->data);
      if (e.reorder[r]) {
        void* buffer = ThreadOperandBuffer(r, e.inner[r].get_size(), own[r]);
        if (buffer == nullptr) return ResourceExhausted("out of host memory for a convolution operand's layout");
        inner[r] = dnnl::memory(e.inner[r], eng.engine, buffer);
        if (r != out && !reorder(r, user[r], inner[r])) return no_scratch();
      } else {
        inner[r] = user[r];
      }
      args[kArgs[static_cast<int>(p.path)][r]] = inner[r];
    }
    if (!AddThreadScratchpad(e.scratch, eng.engine, args)) return no_scratch();
    e.prim.execute(stream, args);
    if (e.reorder[out] && !reorder(out, inner[out], user[out])) return no_scratch();
    stream.wait();
  } catch (const dnnl::error& err) {
    return Internal(std::string("oneDNN convolution failed: ") + err.what());
  }
  return Status::Ok();
}

// Convolutions below this many multiply-adds run on the calling thread: tens of microseconds on
// one core, about what waking the pool and waiting for it costs.
constexpr int64_t kSplitMacs = int64_t{1} << 21;

// Runs the problem split by images over the pool (Note [oneDNN on one thread]): each thread runs
// the primitive for its block of images (equal blocks share one). A weight gradient sums over
// the images, so each block's goes to a float32 buffer of its own and the blocks are added in
// image order after. Batches smaller than the pool run on the calling thread.
Status Execute(const Problem& p) {
  ThreadPool& pool = ThreadPool::Get();
  const int threads = pool.num_threads();
  const int64_t images = p.src.dims[0];
  const int64_t out_features = p.dst.dims[1];
  const int64_t macs = p.dst.NumElements() * (out_features > 0 ? p.wei.NumElements() / out_features : 0);
  if (threads <= 1 || images < 2 || macs < kSplitMacs) return ExecuteHere(p);
  int64_t parts = std::min<int64_t>(threads, images);
  const int64_t per = (images + parts - 1) / parts;
  parts = (images + per - 1) / per;
  const bool sums = p.path == Path::kBackwardWeights;
  const int64_t wn = p.wei.NumElements();
  std::vector<float> partial(sums ? static_cast<size_t>(parts * wn) : 0);
  const Dims wstrides = ContiguousStrides(p.wei.dims);
  auto images_of = [](View v, int64_t lo, int64_t len) {
    v.data = Offset(v.data, lo * v.strides[0], v.dtype);
    v.dims[0] = len;
    return v;
  };
  std::mutex mu;
  Status failed;
  pool.ParallelFor(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t lo = i * per, len = std::min(per, images - lo);
      Problem q = p;
      q.src = images_of(p.src, lo, len);
      q.dst = images_of(p.dst, lo, len);
      if (sums) q.wei = View{partial.data() + i * wn, DType::kF32, p.wei.dims, wstrides};
      Status st = ExecuteHere(q);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = st;
      }
    }
  });
  if (!failed.ok() || !sums) return failed;
  float* total = partial.data();
  for (int64_t i = 1; i < parts; ++i) {
    const float* part = partial.data() + i * wn;
    for (int64_t e = 0; e < wn; ++e) total[e] += part[e];
  }
  return CopyView(View{total, DType::kF32, p.wei.dims, wstrides}, p.wei);
}

// Note [Small convolutions]: oneDNN's primitives cost ~150-250 us a call on the small problems
// late ResNet stages and their gradients give (a 3x3 convolution of a 2x2 or 1x1 image, the weight
// gradient of one, 16 images), whatever their arithmetic: reorders of weights and activations to
// blocked layouts, and a threaded kernel sized for large images. A problem with at most kSmallWork
// (output position, kernel position that meets the input) pairs per image and a patch matrix
// P[(b, y), (k, f)] = lhs[b, f, coordinate(y, k)] (0 in padding or between dilated elements) of at
// most kSmallPatch elements is computed as P x W, W[(k, f), o] = rhs[o, f, k], with OpenBLAS's
// sgemm on blocks of P's rows (one per pool thread, for products of 8M multiply-adds and up): the
// same sums as the definition, in float32 (as oneDNN's), in another order. Kernel positions that
// meet no input (8 of 9 for a 3x3 kernel over a padded 1x1 image) are left out, and so are output
// positions that no kernel position meets (written as zeros: 8 of 9 of the weight gradient of that
// convolution, a 3x3 output from a 1x1 "kernel", where their rows were most of the product, of the
// patch zeroing and of the scattered stores). The patches come
// from the reference loops' coordinate tables (WindowCoordinates, conv_util.h), so strides, padding
// and both dilations are covered; feature or batch groups are left to oneDNN.
constexpr int64_t kSmallPatch = int64_t{1} << 20;
constexpr int64_t kSmallWork = 16;  // output positions per image x kernel positions used

Status SmallConvolution(const ConvolutionSpec& s, const View& L, const View& R, const View& Y) {
  if (L.dtype != DType::kF32 || R.dtype != DType::kF32 || Y.dtype != DType::kF32 || s.feature_group_count != 1 ||
      s.batch_group_count != 1)
    return Unimplemented("not a small float32 convolution");
  const int n = static_cast<int>(L.dims.size()) - 2;
  const int64_t B = L.dims[0], I = L.dims[1], O = R.dims[0];
  int64_t ysize = 1, ksize = 1;
  for (int d = 0; d < n; ++d) {
    ysize *= Y.dims[2 + d];
    ksize *= R.dims[2 + d];
  }
  const int64_t rows = B * ysize;
  if (rows * ksize * I > kSmallPatch || rows * ksize * I == 0 || R.dims[1] != I) return Unimplemented("not small");
  std::vector<std::vector<int64_t>> tables;
  for (int d = 0; d < n; ++d) tables.push_back(WindowCoordinates(s, d, L.dims[2 + d], Y.dims[2 + d], R.dims[2 + d]));
  // Kernel positions that meet the input somewhere (a 3x3 kernel over a 1x1 image with padding 1
  // uses only its center): the others would only add zero columns.
  std::vector<int64_t> taps;
  for (int64_t ki = 0; ki < ksize; ++ki) {
    bool used = true;
    for (int64_t d = n - 1, r = ki; d >= 0 && used; --d) {
      const int64_t kd = r % R.dims[2 + d], kn = R.dims[2 + d];
      r /= kn;
      bool any = false;
      for (int64_t yd = 0; yd < Y.dims[2 + d] && !any; ++yd) any = tables[d][yd * kn + kd] >= 0;
      used = any;
    }
    if (used) taps.push_back(ki);
  }
  const int64_t cols = static_cast<int64_t>(taps.size()) * I;
  if (cols == 0) return Unimplemented("no kernel position meets the input");  // oneDNN writes the zeros
  // Few output positions, each meeting few kernel positions: measured, oneDNN's fixed cost then
  // dominates; with more of either its kernels win over building patches.
  if (ysize * static_cast<int64_t>(taps.size()) > kSmallWork) return Unimplemented("not small");
  std::vector<int64_t> tap_k(taps.size() * n);  // each tap's kernel index per dim
  for (size_t t = 0; t < taps.size(); ++t)
    for (int64_t d = n - 1, r = taps[t]; d >= 0; --d) {
      tap_k[t * n + d] = r % R.dims[2 + d];
      r /= R.dims[2 + d];
    }
  const float* x = static_cast<const float*>(L.data);
  const float* w = static_cast<const float*>(R.data);
  float* y = static_cast<float*>(Y.data);
  // The input channels-last, so that each tap of a patch row is one contiguous run of I features
  // (an NCHW input holds them a plane apart).
  std::vector<int64_t> xstrides(L.strides.begin(), L.strides.end());
  std::vector<float> staged;
  if (L.strides[1] != 1 && I > 1) {
    int64_t plane = 1;
    for (int d = 0; d < n; ++d) plane *= L.dims[2 + d];
    staged.resize(static_cast<size_t>(B * plane * I));
    // The plane's positions' offsets once; then each (image, feature) plane is read in order and
    // written a row of I apart. (Recomputing a position's offset per element was 60% of a 1x1
    // convolution of [16, 256, 2, 2].)
    std::vector<int64_t> poff(static_cast<size_t>(plane)), sc(n, 0);
    for (int64_t p = 0; p < plane; ++p) {
      int64_t off = 0;
      for (int d = 0; d < n; ++d) off += sc[d] * L.strides[2 + d];
      poff[p] = off;
      for (int d = n - 1; d >= 0; --d) {
        if (++sc[d] < L.dims[2 + d]) break;
        sc[d] = 0;
      }
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < I; ++f) {
        const float* xf = x + b * L.strides[0] + f * L.strides[1];
        float* sf = staged.data() + b * plane * I + f;
        for (int64_t p = 0; p < plane; ++p) sf[p * I] = xf[poff[p]];
      }
    x = staged.data();
    xstrides[1] = 1;
    int64_t st = I;
    for (int d = n - 1; d >= 0; --d) {
      xstrides[2 + d] = st;
      st *= L.dims[2 + d];
    }
    xstrides[0] = st;
  }
  // W transposed, [o, (tap, f)], row-major: each output feature's weights read in order.
  std::vector<float> wt(static_cast<size_t>(O * cols));
  for (size_t t = 0; t < taps.size(); ++t) {
    int64_t woff = 0;
    for (int64_t d = n - 1, r = taps[t]; d >= 0; --d) {
      woff += (r % R.dims[2 + d]) * R.strides[2 + d];
      r /= R.dims[2 + d];
    }
    for (int64_t o = 0; o < O; ++o)
      for (int64_t f = 0; f < I; ++f) wt[o * cols + static_cast<int64_t>(t) * I + f] = w[woff + f * R.strides[1] + o * R.strides[0]];
  }
  // Output positions that no tap of the kernel meets (a weight gradient's corners over a padded
  // 1x1 or 2x2 image: 8 of 9, 5 of 9) are zero: only the others are rows of the product.
  std::vector<int64_t> ypos;  // positions within an image that a tap meets, as flat indices
  {
    std::vector<int64_t> yc(n);
    for (int64_t yp = 0; yp < ysize; ++yp) {
      for (int64_t d = n - 1, r = yp; d >= 0; --d) {
        yc[d] = r % Y.dims[2 + d];
        r /= Y.dims[2 + d];
      }
      bool any = false;
      for (size_t t = 0; t < taps.size() && !any; ++t) {
        bool valid = true;
        for (int d = 0; d < n && valid; ++d) valid = tables[d][yc[d] * R.dims[2 + d] + tap_k[t * n + d]] >= 0;
        any = valid;
      }
      if (any) ypos.push_back(yp);
    }
  }
  auto ypos_offset = [&](int64_t yp) {
    int64_t off = 0;
    for (int64_t d = n - 1, r = yp; d >= 0; --d) {
      off += (r % Y.dims[2 + d]) * Y.strides[2 + d];
      r /= Y.dims[2 + d];
    }
    return off;
  };
  const int64_t per_image = static_cast<int64_t>(ypos.size());
  if (per_image < ysize) ZeroFill(Y);  // the product's rows are written over it
  const int64_t prows = B * per_image;  // the product's rows: (image, position that a tap meets)
  if (prows == 0) return Status::Ok();
  SingleThreadedBlas();
  ThreadPool& pool = ThreadPool::Get();
  // Threads only for products big enough to pay for waking them (~50 us of work each).
  const int64_t parts = prows * cols * O >= (int64_t{1} << 23) ? std::min<int64_t>(pool.num_threads(), prows) : 1;
  auto body = [&](int64_t p0, int64_t p1) {
    std::vector<float> patch, prod;
    std::vector<int64_t> yc(n), yoffs;
    for (int64_t part = p0; part < p1; ++part) {
      const int64_t lo = part * prows / parts, hi = (part + 1) * prows / parts, m = hi - lo;
      if (m == 0) continue;
      patch.assign(static_cast<size_t>(m * cols), 0.0f);
      for (int64_t row = lo; row < hi; ++row) {
        const int64_t b = row / per_image;
        for (int64_t d = n - 1, r = ypos[row % per_image]; d >= 0; --d) {
          yc[d] = r % Y.dims[2 + d];
          r /= Y.dims[2 + d];
        }
        float* prow = patch.data() + (row - lo) * cols;
        for (size_t t = 0; t < taps.size(); ++t) {
          int64_t xoff = b * xstrides[0];
          bool valid = true;
          for (int d = 0; d < n && valid; ++d) {
            const int64_t c = tables[d][yc[d] * R.dims[2 + d] + tap_k[t * n + d]];
            valid = c >= 0;
            xoff += c * xstrides[2 + d];
          }
          if (!valid) continue;
          float* dst = prow + static_cast<int64_t>(t) * I;
          if (xstrides[1] == 1 && I >= 16) std::memcpy(dst, x + xoff, static_cast<size_t>(I) * sizeof(float));
          else for (int64_t f = 0; f < I; ++f) dst[f] = x[xoff + f * xstrides[1]];
        }
      }
      prod.resize(static_cast<size_t>(m * O));
      yoffs.resize(static_cast<size_t>(m));
      for (int64_t row = lo; row < hi; ++row)
        yoffs[row - lo] = row / per_image * Y.strides[0] + ypos_offset(ypos[row % per_image]);
      if (Y.strides[1] == 1) {  // channels-last output: rows of O features
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(O),
                    static_cast<int>(cols), 1.0f, patch.data(), static_cast<int>(cols), wt.data(),
                    static_cast<int>(cols), 0.0f, prod.data(), static_cast<int>(O));
        for (int64_t r = 0; r < m; ++r) std::memcpy(y + yoffs[r], prod.data() + r * O, static_cast<size_t>(O) * sizeof(float));
      } else {  // one plane per output feature: the product transposed, [o, row], written plane by plane
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(O), static_cast<int>(m),
                    static_cast<int>(cols), 1.0f, wt.data(), static_cast<int>(cols), patch.data(),
                    static_cast<int>(cols), 0.0f, prod.data(), static_cast<int>(m));
        for (int64_t o = 0; o < O; ++o) {
          const float* src = prod.data() + o * m;
          float* dst = y + o * Y.strides[1];
          for (int64_t r = 0; r < m; ++r) dst[yoffs[r]] = src[r];
        }
      }
    }
  };
  if (parts > 1) pool.ParallelFor(parts, 1, body);
  else body(0, 1);
  return Status::Ok();
}

}  // namespace

Status RunConvolution(const Op& op, const View& lhs, const View& rhs, const View& out) {
  ConvolutionSpec s = ConvolutionSpec::FromAttrs(op.attrs);
  if (out.NumElements() == 0) return Status::Ok();
  View L = CanonicalLhs(s, lhs), R = CanonicalRhs(s, rhs), Y = CanonicalOut(s, out);
  bool dnnl_ok = L.NumElements() > 0 && R.NumElements() > 0 && DnnlType(out.dtype) != dt::undef &&
                 DnnlType(lhs.dtype) != dt::undef && lhs.dtype == rhs.dtype;
  std::vector<char> ls, rs, ys, wstore;
  if (dnnl_ok) {
    // Broadcast, reversed or holed operand views are copied to a plain layout first; a holed
    // output is computed into a plain one and copied out.
    if (!Addressable(L)) L = Contiguous(L, L.dtype, ls);
    if (!Addressable(R)) R = Contiguous(R, R.dtype, rs);
    View target = Y;
    if (!Addressable(Y)) {
      ys.resize(static_cast<size_t>(std::max<int64_t>(1, Y.NumElements()) * DTypeSize(Y.dtype)));
      Y = View{ys.data(), Y.dtype, Y.dims, ContiguousStrides(Y.dims)};
    }
    Status small = SmallConvolution(s, L, R, Y);
    if (small.code() != Code::kUnimplemented) {
      if (small.ok() && Y.data != target.data) small = CopyView(Y, target);
      return small;
    }
    Problem p;
    if (PlanProblem(s, L, R, Y, &p, wstore)) {
      Status st = Execute(p);
      if (st.ok() && Y.data != target.data) st = CopyView(Y, target);
      if (st.code() != Code::kUnimplemented) return st;  // else: the reference loops
    }
  }
  return ReferenceConvolution(s, lhs, rhs, out);
}

}  // namespace tpu::host
