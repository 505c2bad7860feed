// host_loops.h at -O3 -march=native (bench/CMakeLists.txt sets the flags).
#define HOST_LOOPS_NS native
#include "host_loops.h"

namespace bench {

void native_rows(int op, const float* x, float* y, const float* w, const float* b, int64_t lo, int64_t hi, int64_t cols,
                 float eps) {
  native::rows(op, x, y, w, b, lo, hi, cols, eps);
}

void native_sums(int axis, const float* x, float* out, int64_t lo, int64_t hi, int64_t rows, int64_t cols) {
  native::sums(axis, x, out, lo, hi, rows, cols);
}

}  // namespace bench
