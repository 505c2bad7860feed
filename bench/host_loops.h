// The plain C++ loops the host benchmark holds tessel's row kernels to: one
// row of softmax, layer norm and RMS norm, and the sums of rows and of
// columns, as anyone would write them. The
// header is compiled twice, into namespaces named by HOST_LOOPS_NS: by
// host_kernels.cc at -O2 and by host_loops_native.cc at -O3 -march=native.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace bench::HOST_LOOPS_NS {

inline void softmax_row(const float* in, float* out, int64_t cols) {
  float m = -INFINITY, s = 0;
  for (int64_t j = 0; j < cols; ++j) m = std::max(m, in[j]);
  for (int64_t j = 0; j < cols; ++j) s += out[j] = std::exp(in[j] - m);
  for (int64_t j = 0; j < cols; ++j) out[j] /= s;
}

inline void layer_norm_row(const float* in, float* out, const float* w, const float* b, int64_t cols, float eps) {
  float mean = 0, var = 0;
  for (int64_t j = 0; j < cols; ++j) mean += in[j];
  mean /= cols;
  for (int64_t j = 0; j < cols; ++j) var += (in[j] - mean) * (in[j] - mean);
  const float rstd = 1 / std::sqrt(var / cols + eps);
  for (int64_t j = 0; j < cols; ++j) out[j] = (in[j] - mean) * rstd * w[j] + b[j];
}

inline void rms_norm_row(const float* in, float* out, const float* w, int64_t cols, float eps) {
  float sq = 0;
  for (int64_t j = 0; j < cols; ++j) sq += in[j] * in[j];
  const float rstd = 1 / std::sqrt(sq / cols + eps);
  for (int64_t j = 0; j < cols; ++j) out[j] = in[j] * rstd * w[j];
}

// Rows [lo, hi) of a [rows, cols] matrix: op 0 softmax, 1 layer norm, 2 RMS norm.
inline void rows(int op, const float* x, float* y, const float* w, const float* b, int64_t lo, int64_t hi, int64_t cols,
                 float eps) {
  for (int64_t r = lo; r < hi; ++r) {
    if (op == 0) softmax_row(x + r * cols, y + r * cols, cols);
    if (op == 1) layer_norm_row(x + r * cols, y + r * cols, w, b, cols, eps);
    if (op == 2) rms_norm_row(x + r * cols, y + r * cols, w, cols, eps);
  }
}

// Sums of a [rows, cols] matrix: axis 1, those of rows [lo, hi); axis 0,
// those of columns [lo, hi), a row at a time.
inline void sums(int axis, const float* x, float* out, int64_t lo, int64_t hi, int64_t rows, int64_t cols) {
  if (axis == 1) {
    for (int64_t r = lo; r < hi; ++r) {
      float s = 0;
      for (int64_t j = 0; j < cols; ++j) s += x[r * cols + j];
      out[r] = s;
    }
    return;
  }
  for (int64_t j = lo; j < hi; ++j) out[j] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = lo; j < hi; ++j) out[j] += x[r * cols + j];
  }
}

}  // namespace bench::HOST_LOOPS_NS

namespace bench {
// The loops at -O3 -march=native (host_loops_native.cc).
void native_rows(int op, const float* x, float* y, const float* w, const float* b, int64_t lo, int64_t hi, int64_t cols,
                 float eps);
void native_sums(int axis, const float* x, float* out, int64_t lo, int64_t hi, int64_t rows, int64_t cols);
}  // namespace bench
