// The reference convolution: StableHLO's definition as plain loops (every attribute, any dtype),
// accumulating in double (int64 for integers). convolution.cc uses it for what oneDNN does not
// cover (float64, integers, unusual attribute mixes, empty operands); tests use it as the oracle.
#include <cstring>
#include <vector>

#include "ir/window.h"
#include "runtime/host/conv_util.h"

namespace tpu::host {
namespace {

template <typename A>
void Loop(const ConvolutionSpec& s, const View& L, const View& R, const View& Y, A* out) {
  int n = static_cast<int>(L.dims.size()) - 2;
  const A* x = static_cast<const A*>(L.data);
  const A* w = static_cast<const A*>(R.data);
  int64_t B = L.dims[0], O = R.dims[0], I = R.dims[1];
  int64_t fgc = s.feature_group_count, bgc = s.batch_group_count;
  int64_t out_batch = B / bgc;
  std::vector<std::vector<int64_t>> tables;
  int64_t ysize = 1, ksize = 1;
  for (int d = 0; d < n; ++d) {
    tables.push_back(WindowCoordinates(s, d, L.dims[2 + d], Y.dims[2 + d], R.dims[2 + d]));
    ysize *= Y.dims[2 + d];
    ksize *= R.dims[2 + d];
  }
  std::vector<int64_t> yc(n), kc(n);
  for (int64_t b = 0; b < out_batch; ++b)
    for (int64_t o = 0; o < O; ++o) {
      int64_t fg = o / (O / fgc), bg = o / (O / bgc);
      int64_t lb = bg * out_batch + b;
      for (int64_t yi = 0; yi < ysize; ++yi) {
        for (int d = n - 1, r = yi; d >= 0; --d) {
          yc[d] = r % Y.dims[2 + d];
          r /= Y.dims[2 + d];
        }
        A acc = 0;
        for (int64_t ki = 0; ki < ksize; ++ki) {
          int64_t xoff = lb * L.strides[0], woff = o * R.strides[0];
          bool valid = true;
          for (int d = n - 1, r = ki; d >= 0; --d) {
            kc[d] = r % R.dims[2 + d];
            r /= R.dims[2 + d];
            int64_t c = tables[d][yc[d] * R.dims[2 + d] + kc[d]];
            valid &= c >= 0;
            xoff += c * L.strides[2 + d];
            woff += kc[d] * R.strides[2 + d];
          }
          if (!valid) continue;
          for (int64_t f = 0; f < I; ++f)
            acc += x[xoff + (fg * I + f) * L.strides[1]] * w[woff + f * R.strides[1]];
        }
        out[(b * O + o) * ysize + yi] = acc;
      }
    }
}

}  // namespace

Status ReferenceConvolution(const ConvolutionSpec& s, const View& lhs, const View& rhs,
                            const View& out) {
  // Canonical operands in the accumulation type, contiguous.
  DType acc = IsFloat(out.dtype) || IsFloat(lhs.dtype) ? DType::kF64 : DType::kI64;
  std::vector<char> ls, rs;
  View L = Contiguous(CanonicalLhs(s, lhs), acc, ls);
  View R = Contiguous(CanonicalRhs(s, rhs), acc, rs);
  View Y = CanonicalOut(s, out);
  int64_t n = Y.NumElements();
  if (n == 0) return Status::Ok();
  std::vector<char> result(n * 8);
  if (acc == DType::kF64)
    Loop<double>(s, L, R, Y, reinterpret_cast<double*>(result.data()));
  else
    Loop<int64_t>(s, L, R, Y, reinterpret_cast<int64_t*>(result.data()));
  View src{result.data(), acc, Y.dims, ContiguousStrides(Y.dims)};
  return CopyView(src, Y);
}

}  // namespace tpu::host
