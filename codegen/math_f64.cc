#include "codegen/math_f64.h"

#include <cmath>

namespace tessel::codegen {
namespace {

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^11 (the high part has
// its low 32 bits zero); kLn2Lo carries the rest.
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kLog2e = 1.44269504088896338700e+00;
// exp overflows past this and underflows to 0 below kExpUnderflow.
constexpr double kExpOverflow = 7.09782712893383973096e+02;
constexpr double kExpUnderflow = -7.45133219101941108420e+02;

llvm::Value* f64(llvm::IRBuilder<>& b, double v) { return llvm::ConstantFP::get(b.getDoubleTy(), v); }

llvm::Value* fma(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getDoubleTy()}, {x, y, z});
}

// 2^k as a double for k in [-1022, 1023] (i64).
llvm::Value* pow2(llvm::IRBuilder<>& b, llvm::Value* k) {
  return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, b.getInt64(1023)), 52), b.getDoubleTy());
}

// Horner's rule on c[0] + c[1] r + c[2] r^2 + ... with fused steps.
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* r, const double* c, int n) {
  llvm::Value* acc = f64(b, c[n - 1]);
  for (int i = n - 2; i >= 0; --i) acc = fma(b, acc, r, f64(b, c[i]));
  return acc;
}

}  // namespace

llvm::Value* emit_exp_f64(llvm::IRBuilder<>& b, llvm::Value* x) {
  // x = k ln2 + r with |r| <= ln2 / 2; exp(x) = 2^k exp(r).
  llvm::Value* kf = b.CreateIntrinsic(llvm::Intrinsic::rint, {b.getDoubleTy()}, {b.CreateFMul(x, f64(b, kLog2e))});
  llvm::Value* r = fma(b, b.CreateFNeg(kf), f64(b, kLn2Hi), x);
  r = fma(b, b.CreateFNeg(kf), f64(b, kLn2Lo), r);
  // Taylor terms 1/n! up to n = 13: the first left out, r^14 / 14!, is below
  // 2^-60 for |r| <= ln2 / 2.
  double c[14];
  c[0] = 1;
  for (int n = 1; n < 14; ++n) c[n] = c[n - 1] / n;
  llvm::Value* p = horner(b, r, c, 14);
  // Scale in two steps so that k from -1075 to 1024 stays within the normal
  // exponents of each factor (subnormal and near-overflow results).
  llvm::Value* k = b.CreateFPToSI(b.CreateIntrinsic(llvm::Intrinsic::maxnum, {b.getDoubleTy()},
                                                    {b.CreateIntrinsic(llvm::Intrinsic::minnum, {b.getDoubleTy()},
                                                                       {kf, f64(b, 1100)}),
                                                     f64(b, -1100)}),
                                  b.getInt64Ty());
  llvm::Value* k1 = b.CreateAShr(k, 1);
  llvm::Value* y = b.CreateFMul(b.CreateFMul(p, pow2(b, k1)), pow2(b, b.CreateSub(k, k1)));
  y = b.CreateSelect(b.CreateFCmpOGT(x, f64(b, kExpOverflow)), f64(b, INFINITY), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, f64(b, kExpUnderflow)), f64(b, 0), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), b.CreateFAdd(x, x), y);  // NaN stays NaN
}

llvm::Value* emit_log_f64(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* i64 = b.getInt64Ty();
  // Subnormal inputs are scaled into the normal range first.
  llvm::Value* tiny = b.CreateFCmpOLT(x, f64(b, 0x1p-1022));
  llvm::Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, f64(b, 0x1p54)), x);
  llvm::Value* bits = b.CreateBitCast(xs, i64);
  llvm::Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, 52), b.getInt64(0x7FF)), b.getInt64(1023));
  e = b.CreateSub(e, b.CreateSelect(tiny, b.getInt64(54), b.getInt64(0)));
  // m in [1, 2), then folded into [sqrt(1/2), sqrt(2)) so that f = m - 1 is small.
  llvm::Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, b.getInt64(0x000FFFFFFFFFFFFFull)),
                                              b.getInt64(0x3FF0000000000000ull)),
                                   b.getDoubleTy());
  llvm::Value* big = b.CreateFCmpOGT(m, f64(b, M_SQRT2));
  m = b.CreateSelect(big, b.CreateFMul(m, f64(b, 0.5)), m);
  e = b.CreateAdd(e, b.CreateZExt(big, i64));
  llvm::Value* f = b.CreateFSub(m, f64(b, 1));
  // log(m) = 2 atanh(s) with s = f / (2 + f), |s| <= 0.1716:
  // f - f^2/2 + s (f^2/2 + R(s^2)), R = 2 (s^2/3 + s^4/5 + ...), which keeps
  // the large terms exact and leaves the series only the small remainder.
  llvm::Value* s = b.CreateFDiv(f, b.CreateFAdd(f64(b, 2), f));
  llvm::Value* z = b.CreateFMul(s, s);
  double c[10];
  for (int n = 0; n < 10; ++n) c[n] = 2.0 / (2 * n + 3);
  llvm::Value* R = b.CreateFMul(z, horner(b, z, c, 10));
  llvm::Value* hf = b.CreateFMul(f64(b, 0.5), b.CreateFMul(f, f));
  llvm::Value* ef = b.CreateSIToFP(e, b.getDoubleTy());
  llvm::Value* lo = fma(b, s, b.CreateFAdd(hf, R), fma(b, ef, f64(b, kLn2Lo), b.CreateFNeg(hf)));
  llvm::Value* y = fma(b, ef, f64(b, kLn2Hi), b.CreateFAdd(f, lo));
  // Special values: log(+inf) = +inf, log(0) = -inf, log(x < 0) = NaN, NaN stays NaN.
  y = b.CreateSelect(b.CreateFCmpOEQ(x, f64(b, INFINITY)), x, y);
  y = b.CreateSelect(b.CreateFCmpOEQ(x, f64(b, 0)), f64(b, -INFINITY), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, f64(b, 0)), f64(b, NAN), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), b.CreateFAdd(x, x), y);
}

}  // namespace tessel::codegen
