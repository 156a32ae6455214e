// float64 GEMM through OpenBLAS and integer GEMM as cache-blocked loops, both threaded by our pool
// over blocks of the output (OpenBLAS itself runs single-threaded, so there is one thread budget).
#include "runtime/host/dot_blas.h"

#include <cblas.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/host/dot_int_simd.h"

namespace tpu::host {
namespace {

// Blocks of the integer GEMM: an [kMc, kKc] block of a and a [kKc, kNc] block of b (converted to
// the unsigned accumulator type) and the [kMc, kNc] block of c stay in L2 (~0.8 MiB for 64 bits).
constexpr int64_t kMc = 64, kNc = 256, kKc = 256;

template <typename M>
void IntGemm(const StridedMats& A, const StridedMats& B, M* c, int64_t nb, int64_t m, int64_t n, int64_t k) {
  using U = std::conditional_t<sizeof(M) == 8, uint64_t, uint32_t>;  // wraps; truncated at the end
  const M* a = static_cast<const M*>(A.data);
  const M* b = static_cast<const M*>(B.data);
  const int64_t mb = (m + kMc - 1) / kMc, nbk = (n + kNc - 1) / kNc;
  const int64_t tasks = nb * mb * nbk;
  auto body = [&](int64_t t0, int64_t t1) {
    std::vector<U> ap(kMc * kKc), bp(kKc * kNc), cp(kMc * kNc);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t batch = t / (mb * nbk), i0 = (t / nbk % mb) * kMc, j0 = (t % nbk) * kNc;
      int64_t mr = std::min(kMc, m - i0), nc = std::min(kNc, n - j0);
      const M* ab = a + batch * A.batch_stride;
      const M* bb = b + batch * B.batch_stride;
      std::fill(cp.begin(), cp.begin() + mr * nc, U(0));
      for (int64_t p0 = 0; p0 < k; p0 += kKc) {
        int64_t kc = std::min(kKc, k - p0);
        for (int64_t i = 0; i < mr; ++i)
          for (int64_t p = 0; p < kc; ++p)
            ap[i * kc + p] = static_cast<U>(ab[(i0 + i) * A.row_stride + (p0 + p) * A.col_stride]);
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < nc; ++j)
            bp[p * nc + j] = static_cast<U>(bb[(p0 + p) * B.row_stride + (j0 + j) * B.col_stride]);
        IntGemmBlock(ap.data(), bp.data(), cp.data(), mr, nc, kc);
      }
      M* cb = c + (batch * m + i0) * n + j0;
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nc; ++j) cb[i * n + j] = static_cast<M>(cp[i * nc + j]);
    }
  };
  if (m * n * k >= (int64_t{1} << 15)) ThreadPool::Get().ParallelFor(tasks, 1, body);
  else body(0, tasks);
}

// How CBLAS (row-major) addresses a rows x cols matrix with these strides, if it can.
bool BlasLayout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, CBLAS_TRANSPOSE* tr, int64_t* ld) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols))) {
    *tr = CblasNoTrans;
    *ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows))) {
    *tr = CblasTrans;
    *ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    return true;
  }
  return false;
}

// A copy of the operand, contiguous [nb, rows, cols], when CBLAS cannot read it as it is.
StridedMats Packed(const StridedMats& x, int64_t nb, int64_t rows, int64_t cols, std::vector<double>& store) {
  store.resize(std::max<int64_t>(1, nb * rows * cols));
  const double* p = static_cast<const double*>(x.data);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        store[(b * rows + i) * cols + j] = p[b * x.batch_stride + i * x.row_stride + j * x.col_stride];
  return {store.data(), rows * cols, cols, 1};
}

Status GemmF64(StridedMats A, StridedMats B, double* c, int64_t nb, int64_t m, int64_t n, int64_t k) {
  SingleThreadedBlas();
  CBLAS_TRANSPOSE ta, tb;
  int64_t lda, ldb;
  std::vector<double> sa, sb;
  if (!BlasLayout(m, k, A.row_stride, A.col_stride, &ta, &lda)) {
    A = Packed(A, nb, m, k, sa);
    BlasLayout(m, k, A.row_stride, A.col_stride, &ta, &lda);
  }
  if (!BlasLayout(k, n, B.row_stride, B.col_stride, &tb, &ldb)) {
    B = Packed(B, nb, k, n, sb);
    BlasLayout(k, n, B.row_stride, B.col_stride, &tb, &ldb);
  }
  // Blocks of rows (or of columns, when the output is wide) per thread.
  ThreadPool& pool = ThreadPool::Get();
  bool big = m * n * k >= (int64_t{1} << 18);
  int64_t parts = big ? std::max<int64_t>(1, (2 * pool.num_threads() + nb - 1) / nb) : 1;
  bool by_rows = m >= n;
  parts = std::min(parts, std::max<int64_t>(1, (by_rows ? m : n) / 16));
  const double* a = static_cast<const double*>(A.data);
  const double* b = static_cast<const double*>(B.data);
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t batch = t / parts, part = t % parts, len = by_rows ? m : n;
      int64_t lo = part * len / parts, hi = (part + 1) * len / parts;
      const double* ab = a + batch * A.batch_stride;
      const double* bb = b + batch * B.batch_stride;
      double* cb = c + batch * m * n;
      if (by_rows) {
        ab += lo * A.row_stride;  // rows lo..hi of op(A) and of C
        cb += lo * n;
      } else {
        bb += lo * B.col_stride;  // columns lo..hi of op(B) and of C
        cb += lo;
      }
      int64_t mm = by_rows ? hi - lo : m, nn = by_rows ? n : hi - lo;
      if (mm == 0 || nn == 0) continue;
      cblas_dgemm(CblasRowMajor, ta, tb, mm, nn, k, 1.0, ab, lda, bb, ldb, 0.0, cb, n);
    }
  };
  if (nb * parts > 1) pool.ParallelFor(nb * parts, 1, body);
  else body(0, 1);
  return Status::Ok();
}

}  // namespace

void SingleThreadedBlas() {
  static const bool single = [] {  // our pool supplies the threads
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single;
}

Status BatchedGemm(DType t, const StridedMats& a, const StridedMats& b, void* c, int64_t nb,
                   int64_t m, int64_t n, int64_t k) {
  switch (t) {
    case DType::kF64: return GemmF64(a, b, static_cast<double*>(c), nb, m, n, k);
    case DType::kI64: IntGemm(a, b, static_cast<int64_t*>(c), nb, m, n, k); break;
    case DType::kU64: IntGemm(a, b, static_cast<uint64_t*>(c), nb, m, n, k); break;
    case DType::kI32: IntGemm(a, b, static_cast<int32_t*>(c), nb, m, n, k); break;
    case DType::kU32: IntGemm(a, b, static_cast<uint32_t*>(c), nb, m, n, k); break;
    case DType::kI16: IntGemm(a, b, static_cast<int16_t*>(c), nb, m, n, k); break;
    case DType::kI8: IntGemm(a, b, static_cast<int8_t*>(c), nb, m, n, k); break;
    case DType::kU8: IntGemm(a, b, static_cast<uint8_t*>(c), nb, m, n, k); break;
    default: return Unimplemented(std::string("dot_general on ") + DTypeName(t));
  }
  return Status::Ok();
}

}  // namespace tpu::host
