#include "codegen/math.h"

#include <cmath>
#include <vector>

#include "base/status.h"
#include "codegen/math_f64.h"

namespace tessel::codegen {
namespace {

using llvm::Value;

// ln 2 split for f32 range reduction: kLn2Hi has 16 significant bits, so
// k * kLn2Hi is exact for |k| < 2^8 (log's exponents); kLn2Lo is the rest.
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
// The nearest float to ln 2 and what it misses by, for exp's reduction,
// where the first product's exactness comes from the cancellation.
constexpr float kLn2 = 0x1.62e430p-1f;
constexpr float kLn2Tail = -0x1.05c610p-29f;
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLog2eTail = 0x1.4ae0c0p-26f;
// pi/2 in three floats for Cody and Waite's reduction, valid with fused
// steps while |x| < kSmallArgument.
constexpr float kPiOver2[3] = {0x1.921fb6p+0f, -0x1.777a5cp-25f, -0x1.ee59dap-50f};
constexpr float kSmallArgument = 105615.0f;
// pi/2 in three doubles, the first of 33 significant bits, so that k times
// it is exact for the k < 2^17 of arguments below kSmallArgument.
constexpr double kPiOver2F64[3] = {0x1.921fb544p+0, 0x1.0b4611a6p-34, 0x1.3198a2e037073p-69};
// The bits of 2/pi after the binary point, most significant word first:
// floor(2/pi * 2^256), for Payne and Hanek's reduction of large arguments.
constexpr uint32_t kTwoOverPi[8] = {0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0,
                                    0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561};
// erf(x) = 1 - exp(q(x - kErfCenter)) on [1, kErfOne): q is a Chebyshev
// interpolant of log(erfc(x)) of degree 10 (scripts/math_fit.py), within
// 2e-9 of it, 6e-7 with its coefficients rounded to f32; at kErfOne and
// above erf rounds to 1 in f32.
constexpr float kErfCenter = 2.46f;
constexpr float kErfOne = 3.92f;
constexpr float kErfTail[11] = {-7.59421778f,    -5.27722216f,    -0.942569733f,   -0.011211466f,
                                0.00225156313f,  -0.00043964191f, 8.06249227e-05f, -1.35520122e-05f,
                                1.88465594e-06f, -5.3383765e-08f, -4.4973639e-08f};

// Emits one function's IR for f32 or f64 values (the type of `x`).
class Math {
 public:
  Math(llvm::IRBuilder<>& b, llvm::Type* t) : b_(b), t_(t) {}

  Value* c(double v) { return llvm::ConstantFP::get(t_, v); }
  Value* fma(Value* x, Value* y, Value* z) { return b_.CreateIntrinsic(llvm::Intrinsic::fma, {t_}, {x, y, z}); }
  Value* call(llvm::Intrinsic::ID id, Value* x) { return b_.CreateIntrinsic(id, {t_}, {x}); }
  Value* abs(Value* x) { return call(llvm::Intrinsic::fabs, x); }
  Value* copysign(Value* mag, Value* sign) { return b_.CreateIntrinsic(llvm::Intrinsic::copysign, {t_}, {mag, sign}); }
  Value* select(Value* cond, Value* a, Value* b) { return b_.CreateSelect(cond, a, b); }
  Value* lt(Value* x, double v) { return b_.CreateFCmpOLT(x, c(v)); }
  Value* gt(Value* x, double v) { return b_.CreateFCmpOGT(x, c(v)); }
  Value* is_nan(Value* x) { return b_.CreateFCmpUNO(x, x); }
  // c[0] + c[1] x + c[2] x^2 + ... with fused steps.
  Value* horner(Value* x, const std::vector<double>& coefs) {
    Value* acc = c(coefs.back());
    for (int i = static_cast<int>(coefs.size()) - 2; i >= 0; --i) acc = fma(acc, x, c(coefs[i]));
    return acc;
  }
  bool is_f64() const { return t_->isDoubleTy(); }

  Value* exp(Value* x) { return is_f64() ? emit_exp_f64(b_, x) : exp_f32(x); }

  // exp(x) = 2^k exp(r), x = k ln2 + r, |r| <= ln2 / 2; exp(r) by its
  // Taylor terms to r^7 (the first left out is below 2^-27 relative).
  Value* exp_f32(Value* x) {
    Value* k = call(llvm::Intrinsic::rint, b_.CreateFMul(x, c(kLog2e)));
    Value* r = fma(b_.CreateFNeg(k), c(kLn2), x);
    r = fma(b_.CreateFNeg(k), c(kLn2Tail), r);
    Value* p = horner(r, taylor_exp(8, 1.0));
    return special_exp(x, scale(p, k), 88.72283935546875, -103.97908782958984);
  }

  // 2^x = 2^k 2^r, r = x - k exactly, |r| <= 1/2.
  Value* exp2_f32(Value* x) {
    Value* k = call(llvm::Intrinsic::rint, x);
    Value* r = b_.CreateFSub(x, k);
    Value* p = horner(r, taylor_exp(8, std::log(2.0)));
    return special_exp(x, scale(p, k), 128.0, -151.0);
  }

  // log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)); log(m) through
  // s = f / (2 + f), f = m - 1 (see emit_log_f64). Returns log(m) as a sum
  // f + lo that keeps the bits lost in rounding it; `e` as f32.
  void log_parts(Value* x, Value** e_out, Value** f_out, Value** lo_out) {
    Value *e, *m;
    split_exponent(x, &e, &m);
    Value* f = b_.CreateFSub(m, c(1));
    Value* s = b_.CreateFDiv(f, b_.CreateFAdd(c(2), f));
    Value* z = b_.CreateFMul(s, s);
    std::vector<double> atanh;
    for (int n = 0; n < 5; ++n) atanh.push_back(2.0 / (2 * n + 3));
    Value* big_r = b_.CreateFMul(z, horner(z, atanh));
    Value* hf = b_.CreateFMul(c(0.5), b_.CreateFMul(f, f));
    *e_out = b_.CreateSIToFP(e, t_);
    *f_out = f;
    *lo_out = fma(s, b_.CreateFAdd(hf, big_r), b_.CreateFNeg(hf));
  }

  Value* log_f32(Value* x) {
    Value *e, *f, *lo;
    log_parts(x, &e, &f, &lo);
    Value* y = fma(e, c(kLn2Hi), b_.CreateFAdd(f, fma(e, c(kLn2Lo), lo)));
    return special_log(x, y);
  }

  // f64: 2^x = 2^k exp(r ln 2), r = x - k exactly; exp of the rounded
  // product is within 1.5 ulp.
  Value* exp2_f64(Value* x) {
    Value* k = call(llvm::Intrinsic::rint, x);
    Value* p = emit_exp_f64(b_, b_.CreateFMul(b_.CreateFSub(x, k), c(M_LN2)));
    return special_exp(x, scale(p, k), 1024.0, -1076.0);
  }

  // f64: log2(x) = e + log(m) log2(e) with m in [sqrt(1/2), sqrt(2)), so
  // that powers of two come out exact.
  Value* log2_f64(Value* x) {
    Value *e, *m;
    split_exponent(x, &e, &m);
    Value* y = fma(emit_log_f64(b_, m), c(M_LOG2E), b_.CreateSIToFP(e, t_));
    return special_log(x, y);
  }

  // log2(x) = e + (f + lo) log2(e), the product carried to twice f32's
  // precision so that the sum with e rounds once.
  Value* log2_f32(Value* x) {
    Value *e, *f, *lo;
    log_parts(x, &e, &f, &lo);
    Value* hi = b_.CreateFMul(f, c(kLog2e));
    Value* err = fma(f, c(kLog2e), b_.CreateFNeg(hi));
    Value* tail = b_.CreateFAdd(err, fma(f, c(kLog2eTail), b_.CreateFMul(lo, c(kLog2e))));
    Value* y = b_.CreateFAdd(b_.CreateFAdd(e, hi), tail);
    return special_log(x, y);
  }

  // tanh x: x + x^3 P(x^2) by its Taylor series where |x| < 0.55, else
  // 1 - 2 / (exp(2|x|) + 1) with x's sign; 1 once exp overflows.
  Value* tanh(Value* x) {
    const int terms = is_f64() ? 22 : 9;
    std::vector<double> a = {1.0};  // tanh' = 1 - tanh^2 gives the coefficients
    for (int n = 1; n < terms; ++n) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += a[i] * a[n - 1 - i];
      a.push_back(-s / (2 * n + 1));
    }
    Value* z = b_.CreateFMul(x, x);
    Value* small = copysign(fma(b_.CreateFMul(x, z), horner(z, {a.begin() + 1, a.end()}), x), x);  // keeps -0
    Value* ax = abs(x);
    Value* e = exp(b_.CreateFMul(ax, c(2)));
    Value* large = b_.CreateFSub(c(1), b_.CreateFDiv(c(2), b_.CreateFAdd(e, c(1))));
    return select(lt(ax, 0.55), small, copysign(large, x));
  }

  // 1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below, so that
  // neither the large-x nor the negative side cancels or overflows.
  Value* sigmoid(Value* x) {
    Value* e = exp(b_.CreateFNeg(abs(x)));
    Value* d = b_.CreateFAdd(c(1), e);
    Value* y = select(lt(x, 0), b_.CreateFDiv(e, d), b_.CreateFDiv(c(1), d));
    return select(is_nan(x), x, y);
  }

  // sinh by its Taylor series where |x| < 1, (e - 1/e) / 2 up to far(),
  // e / 2 above (half_exp).
  Value* sinh(Value* x) {
    const int terms = is_f64() ? 9 : 6;
    std::vector<double> p;
    double f = 6;  // 3!
    for (int n = 0; n < terms; ++n) p.push_back(1 / f), f *= (2 * n + 4) * (2 * n + 5);
    Value* z = b_.CreateFMul(x, x);
    Value* small = copysign(fma(b_.CreateFMul(x, z), horner(z, p), x), x);  // keeps -0
    Value* ax = abs(x);
    Value* e = exp(ax);
    Value* mid = b_.CreateFMul(c(0.5), b_.CreateFSub(e, b_.CreateFDiv(c(1), e)));
    Value* y = select(lt(ax, far()), mid, half_exp(ax, e));
    return select(lt(ax, 1), small, copysign(y, x));
  }

  Value* cosh(Value* x) {
    Value* ax = abs(x);
    Value* e = exp(ax);
    Value* mid = b_.CreateFMul(c(0.5), b_.CreateFAdd(e, b_.CreateFDiv(c(1), e)));
    return select(lt(ax, far()), mid, half_exp(ax, e));
  }

  // erf x = x P(x^2) by its Taylor series where |x| < 1, 1 - exp(q) above
  // (kErfTail), 1 from kErfOne on; x's sign.
  Value* erf_f32(Value* x) {
    std::vector<double> p;
    double fact = 1;
    for (int n = 0; n < 12; ++n) {
      if (n > 0) fact *= n;
      p.push_back((n % 2 ? -2 : 2) / std::sqrt(M_PI) / (fact * (2 * n + 1)));
    }
    p[0] -= 1;  // x + x (P - 1): the leading coefficient's rounding matters less
    Value* small = fma(x, horner(b_.CreateFMul(x, x), p), x);
    Value* ax = abs(x);
    Value* q = horner(b_.CreateFSub(ax, c(kErfCenter)), {std::begin(kErfTail), std::end(kErfTail)});
    Value* tail = b_.CreateFSub(c(1), exp_f32(q));
    Value* large = select(lt(ax, kErfOne), tail, c(1));
    Value* y = select(lt(ax, 1), small, copysign(large, x));
    return select(is_nan(x), x, y);
  }

  // sin (or cos) x: |x| = q pi/2 + r, |r| <= pi/4, then one of +-sin r,
  // +-cos r by the quadrant q.
  Value* sin_cos_f32(Value* x, bool is_cos) {
    Value* ax = abs(x);
    Value *q, *r;
    reduce_pi_over_2(ax, &q, &r);
    Value* z = b_.CreateFMul(r, r);
    Value* s = fma(b_.CreateFMul(r, z), horner(z, {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880}), r);
    Value* co =
        fma(b_.CreateFMul(z, z), horner(z, {1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800}), fma(z, c(-0.5), c(1)));
    if (is_cos) q = b_.CreateAdd(q, b_.getInt32(1));
    Value* odd = b_.CreateICmpNE(b_.CreateAnd(q, b_.getInt32(1)), b_.getInt32(0));
    Value* negative = b_.CreateICmpNE(b_.CreateAnd(q, b_.getInt32(2)), b_.getInt32(0));
    Value* y = select(odd, co, s);
    y = select(negative, b_.CreateFNeg(y), y);
    if (!is_cos) {
      y = b_.CreateFMul(y, copysign(c(1), x));
      y = select(lt(ax, 0x1p-12), x, y);  // sin x rounds to x (and keeps -0)
    }
    Value* finite = b_.CreateFCmpOLT(ax, c(INFINITY));
    return select(finite, y, b_.CreateFSub(x, x));  // NaN for infinities and NaN
  }

  // f32 ax = q pi/2 + r for finite ax >= 0, r in f64 (to about 2^-62 of
  // pi/2): three fused f64 steps below kSmallArgument, where k pi/2's first
  // part (33 bits) times k (17) is exact; Payne and Hanek's reduction above.
  void reduce_pi_over_2_f64(Value* ax, Value** q_out, Value** r_out) {
    llvm::Type* f64 = b_.getDoubleTy();
    Math d(b_, f64);
    Value* x = b_.CreateFPExt(ax, f64);
    Value* k = d.call(llvm::Intrinsic::rint, b_.CreateFMul(x, d.c(2 / M_PI)));
    Value* r = x;
    for (double part : kPiOver2F64) r = d.fma(b_.CreateFNeg(k), d.c(part), r);
    Value* q = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b_.getInt32Ty(), f64}, {k});
    Value *q_big, *r_big;
    payne_hanek(ax, &q_big, &r_big);
    Value* small = lt(ax, kSmallArgument);
    *q_out = select(small, q, q_big);
    *r_out = select(small, r, r_big);
  }

  // atan(t) for t in [0, 1] (f64): pi/4 + atan((t - 1) / (t + 1)) past
  // tan(pi/8), so that |u| <= tan(pi/8), then u - u^3/3 + u^5/5 ... to
  // u^31 (the first term left out is below 2^-46 of u).
  Value* atan_unit(Value* t) {
    Value* far = gt(t, M_SQRT2 - 1);
    Value* u = select(far, b_.CreateFDiv(b_.CreateFSub(t, c(1)), b_.CreateFAdd(t, c(1))), t);
    std::vector<double> p;
    for (int n = 0; n < 16; ++n) p.push_back((n % 2 ? -1.0 : 1.0) / (2 * n + 1));
    Value* z = b_.CreateFMul(u, u);
    Value* a = fma(b_.CreateFMul(u, z), horner(z, {p.begin() + 1, p.end()}), u);
    return select(far, b_.CreateFAdd(c(M_PI_4), a), a);
  }

  // atan2(y, x) (f64): the angle of the smaller magnitude over the larger,
  // put in its octant: pi/2 - a where |y| > |x|, pi - a where x's sign is
  // set (-0 too), y's sign. Both zero or both infinite give the quotient 0
  // or 1; a NaN gives NaN.
  Value* atan2(Value* y, Value* x) {
    Value* ay = abs(y);
    Value* ax = abs(x);
    Value* swap = b_.CreateFCmpOGT(ay, ax);
    Value* num = select(swap, ax, ay);
    Value* den = select(swap, ay, ax);
    Value* t = b_.CreateFDiv(num, den);
    t = select(b_.CreateFCmpOEQ(den, c(0)), c(0), t);
    t = select(b_.CreateFCmpOEQ(num, c(INFINITY)), c(1), t);
    Value* a = atan_unit(t);
    a = select(swap, b_.CreateFSub(c(M_PI_2), a), a);
    Value* negative_x = b_.CreateICmpSLT(b_.CreateBitCast(x, bits_type()), llvm::ConstantInt::get(bits_type(), 0));
    a = select(negative_x, b_.CreateFSub(c(M_PI), a), a);
    a = copysign(a, y);
    return select(b_.CreateFCmpUNO(x, y), c(NAN), a);
  }

 private:
  // Taylor coefficients of exp(a r): a^n / n!.
  static std::vector<double> taylor_exp(int n, double a) {
    std::vector<double> c = {1.0};
    for (int i = 1; i < n; ++i) c.push_back(c.back() * a / i);
    return c;
  }

  // p 2^k, in two factors so that subnormal and near-overflow results come
  // from normal factors; k (a float) is clamped, the rest saturates.
  Value* scale(Value* p, Value* k) {
    const double limit = is_f64() ? 2100 : 160;
    Value* clamped = b_.CreateIntrinsic(llvm::Intrinsic::maxnum, {t_},
                                        {b_.CreateIntrinsic(llvm::Intrinsic::minnum, {t_}, {k, c(limit)}), c(-limit)});
    Value* kc = b_.CreateFPToSI(clamped, bits_type());
    Value* k1 = b_.CreateAShr(kc, 1);
    return b_.CreateFMul(b_.CreateFMul(p, pow2(k1)), pow2(b_.CreateSub(kc, k1)));
  }
  // The integer type of the float's bits.
  llvm::IntegerType* bits_type() { return is_f64() ? b_.getInt64Ty() : b_.getInt32Ty(); }
  // x = m 2^e for positive finite x (subnormals too) with m in
  // [sqrt(1/2), sqrt(2)) and e an integer of bits_type(); meaningless for
  // other x, which the callers' special cases replace.
  void split_exponent(Value* x, Value** e_out, Value** m_out) {
    const int mantissa = is_f64() ? 52 : 23, bias = is_f64() ? 1023 : 127;
    const int lift = is_f64() ? 54 : 24;  // brings subnormals into the normal range
    llvm::IntegerType* it = bits_type();
    auto k = [&](uint64_t v) { return llvm::ConstantInt::get(it, v); };
    Value* tiny = lt(x, std::ldexp(1.0, 1 - bias));
    Value* bits = b_.CreateBitCast(select(tiny, b_.CreateFMul(x, c(std::ldexp(1.0, lift))), x), it);
    Value* e = b_.CreateSub(b_.CreateLShr(bits, mantissa), k(bias));
    e = b_.CreateSub(e, select(tiny, k(lift), k(0)));
    const uint64_t fraction = (uint64_t{1} << mantissa) - 1;
    Value* m = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, k(fraction)), k(uint64_t(bias) << mantissa)), t_);
    Value* big = gt(m, M_SQRT2);
    *m_out = select(big, b_.CreateFMul(m, c(0.5)), m);
    *e_out = b_.CreateAdd(e, b_.CreateZExt(big, it));
  }
  // 2^k for a normal power (k of bits_type()).
  Value* pow2(Value* k) {
    const int mantissa = is_f64() ? 52 : 23, bias = is_f64() ? 1023 : 127;
    llvm::Type* it = bits_type();
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, llvm::ConstantInt::get(it, bias)), mantissa), t_);
  }

  Value* special_exp(Value* x, Value* y, double overflow, double underflow) {
    y = select(gt(x, overflow), c(INFINITY), y);
    y = select(lt(x, underflow), c(0), y);
    return select(is_nan(x), b_.CreateFAdd(x, x), y);
  }
  // log(+inf) = +inf, log(0) = -inf, log(x < 0) = NaN, NaN stays NaN.
  Value* special_log(Value* x, Value* y) {
    y = select(b_.CreateFCmpOEQ(x, c(INFINITY)), x, y);
    y = select(b_.CreateFCmpOEQ(x, c(0)), c(-INFINITY), y);
    y = select(lt(x, 0), c(NAN), y);
    return select(is_nan(x), b_.CreateFAdd(x, x), y);
  }
  // Where 1/e no longer changes e / 2 in sinh and cosh: e^-2x below half
  // an ulp.
  double far() const { return is_f64() ? 20 : 9; }
  // exp(ax) / 2 for large ax, given e = exp(ax): e / 2 while e is finite,
  // then (h / 2) h with h = exp(ax / 2), which overflows only where
  // exp(ax) / 2 does.
  Value* half_exp(Value* ax, Value* e) {
    Value* h = exp(b_.CreateFMul(ax, c(0.5)));
    Value* beyond = b_.CreateFMul(b_.CreateFMul(h, c(0.5)), h);
    return select(lt(ax, is_f64() ? 709.0 : 88.0), b_.CreateFMul(e, c(0.5)), beyond);
  }

  // ax = q pi/2 + r for finite ax >= 0: three fused steps below
  // kSmallArgument, Payne and Hanek's reduction above.
  void reduce_pi_over_2(Value* ax, Value** q_out, Value** r_out) {
    Value* k = call(llvm::Intrinsic::rint, b_.CreateFMul(ax, c(2 / M_PI)));
    Value* r = ax;
    for (float part : kPiOver2) r = fma(b_.CreateFNeg(k), c(part), r);
    Value* q = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b_.getInt32Ty(), t_}, {k});
    Value *q_big, *r_big;
    payne_hanek(ax, &q_big, &r_big);
    Value* small = lt(ax, kSmallArgument);
    *q_out = select(small, q, q_big);
    *r_out = select(small, r, b_.CreateFPTrunc(r_big, t_));
  }

  // ax = m 2^(e - 23) with a 24-bit m: the bits of 2/pi that make ax 2/pi
  // mod 4 are a 96-bit window starting e - 24 bits after the point; m times
  // the window, in 32-bit limbs, has the quadrant in bits 94-95 and the
  // fraction below, r in f64. Meaningful for e >= 16.
  void payne_hanek(Value* ax, Value** q_out, Value** r_out) {
    llvm::Type* i32 = b_.getInt32Ty();
    llvm::Type* i64 = b_.getInt64Ty();
    Value* bits = b_.CreateBitCast(ax, i32);
    Value* e = b_.CreateSub(b_.CreateLShr(bits, 23), b_.getInt32(127));
    e = b_.CreateIntrinsic(llvm::Intrinsic::smax, {i32}, {e, b_.getInt32(16)});
    Value* m = b_.CreateZExt(b_.CreateOr(b_.CreateAnd(bits, b_.getInt32(0x7FFFFF)), b_.getInt32(0x800000)), i64);
    // The window is floor(2/pi 2^256) >> (161 - (e - 24)), in limbs from the
    // least significant: limb j of the table is kTwoOverPi[7 - j].
    Value* shift = b_.CreateSub(b_.getInt32(185), e);
    Value* limb = b_.CreateLShr(shift, 5);
    Value* offset = b_.CreateZExt(b_.CreateAnd(shift, b_.getInt32(31)), i64);
    auto table = [&](Value* j) {  // limb j of the table, 0 past its end
      Value* v = b_.getInt64(0);
      for (int i = 0; i < 8; ++i) {
        v = select(b_.CreateICmpEQ(j, b_.getInt32(i)), b_.getInt64(kTwoOverPi[7 - i]), v);
      }
      return v;
    };
    Value* w[3];
    for (int t = 0; t < 3; ++t) {
      Value* j = b_.CreateAdd(limb, b_.getInt32(t));
      Value* pair = b_.CreateOr(b_.CreateShl(table(b_.CreateAdd(j, b_.getInt32(1))), 32), table(j));
      w[t] = b_.CreateAnd(b_.CreateLShr(pair, offset), b_.getInt64(0xFFFFFFFF));
    }
    Value* p0 = b_.CreateMul(m, w[0]);
    Value* acc = b_.CreateAdd(b_.CreateMul(m, w[1]), b_.CreateLShr(p0, 32));
    Value* hi = b_.CreateAdd(b_.CreateMul(m, w[2]), b_.CreateLShr(acc, 32));
    Value* q = b_.CreateTrunc(b_.CreateAnd(b_.CreateLShr(hi, 30), b_.getInt64(3)), i32);
    Value* frac = b_.CreateOr(b_.CreateShl(b_.CreateAnd(hi, b_.getInt64(0x3FFFFFFF)), 32),
                              b_.CreateAnd(acc, b_.getInt64(0xFFFFFFFF)));
    // A fraction of a half or more belongs to the next quadrant, negative.
    Value* up = b_.CreateICmpUGE(frac, b_.getInt64(int64_t{1} << 61));
    frac = select(up, b_.CreateSub(frac, b_.getInt64(int64_t{1} << 62)), frac);
    *q_out = b_.CreateAdd(q, b_.CreateZExt(up, i32));
    llvm::Type* f64 = b_.getDoubleTy();
    *r_out = b_.CreateFMul(b_.CreateSIToFP(frac, f64), llvm::ConstantFP::get(f64, M_PI / 2 * 0x1p-62));
  }

  llvm::IRBuilder<>& b_;
  llvm::Type* t_;
};

// In f64, then rounded once. log1p: u = 1 + x is exact but for x below
// 2^-29 in magnitude or past 2^29, and (x - (u - 1)) / u puts back what its
// rounding lost; u = 0 (x = -1) and u = inf keep log's answers, and x = +-0
// stays itself.
Value* emit_log1p_f32(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* f64 = b.getDoubleTy();
  Math m(b, f64);
  Value* xd = b.CreateFPExt(x, f64);
  Value* u = b.CreateFAdd(m.c(1), xd);
  Value* lost = b.CreateFDiv(b.CreateFSub(xd, b.CreateFSub(u, m.c(1))), u);
  Value* r = emit_log_f64(b, u);
  Value* finite = b.CreateAnd(b.CreateFCmpONE(u, m.c(0)), b.CreateFCmpONE(u, m.c(INFINITY)));
  r = m.select(finite, b.CreateFAdd(r, lost), r);
  r = m.select(b.CreateFCmpOEQ(xd, m.c(0)), xd, r);
  return b.CreateFPTrunc(r, x->getType());
}

// expm1 in f64, then rounded once: its Taylor series to x^9 / 9! where
// |x| < 0.35 (the next term is 2e-11 of the sum), exp(x) - 1 beyond, where
// the subtraction loses at most two of f64's bits.
Value* emit_expm1_f32(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* f64 = b.getDoubleTy();
  Math m(b, f64);
  Value* xd = b.CreateFPExt(x, f64);
  std::vector<double> taylor;
  double f = 1;
  for (int n = 1; n <= 9; ++n) taylor.push_back(1 / (f *= n));
  Value* near = b.CreateFMul(xd, m.horner(xd, taylor));
  Value* far = b.CreateFSub(emit_exp_f64(b, xd), m.c(1));
  return b.CreateFPTrunc(m.select(m.lt(m.abs(xd), 0.35), near, far), x->getType());
}

// tan in f64, rounded once: x = q pi/2 + r, then sin r / cos r by their
// Taylor series to r^17 and r^16 (|r| <= pi/4: the first terms left out
// are below 2^-55), -cos r / sin r for odd q; x's sign (tan is odd).
Value* emit_tan_f32(llvm::IRBuilder<>& b, Value* x) {
  Math f(b, x->getType());
  Math m(b, b.getDoubleTy());
  Value* ax = f.abs(x);
  Value *q, *r;
  f.reduce_pi_over_2_f64(ax, &q, &r);
  std::vector<double> sin_p, cos_p;
  double fact = 1;
  for (int n = 1; n <= 17; ++n) {
    fact *= n;
    (n % 2 ? sin_p : cos_p).push_back(((n / 2) % 2 ? -1.0 : 1.0) / fact);
  }
  Value* z = b.CreateFMul(r, r);
  Value* s = m.fma(b.CreateFMul(r, z), m.horner(z, {sin_p.begin() + 1, sin_p.end()}), r);
  Value* co = m.fma(z, m.horner(z, cos_p), m.c(1));
  Value* odd = b.CreateICmpNE(b.CreateAnd(q, b.getInt32(1)), b.getInt32(0));
  Value* t = m.select(odd, b.CreateFNeg(b.CreateFDiv(co, s)), b.CreateFDiv(s, co));
  Value* y = b.CreateFMul(b.CreateFPTrunc(t, x->getType()), f.copysign(f.c(1), x));
  return f.select(b.CreateFCmpOLT(ax, f.c(INFINITY)), y, b.CreateFSub(x, x));  // NaN for infinities and NaN
}

// atan, asin and acos in f64 through atan2, rounded once: asin x =
// atan2(x, sqrt(1 - x^2)) and acos x = atan2(sqrt(1 - x^2), x), where x^2
// is exact and 1 - x^2 exact near |x| = 1; |x| > 1 gives NaN by the root.
Value* emit_inverse_trig_f32(llvm::IRBuilder<>& b, OpCode op, Value* x) {
  Math m(b, b.getDoubleTy());
  Value* xd = b.CreateFPExt(x, b.getDoubleTy());
  Value* r = nullptr;
  if (op == OpCode::kAtan) {
    Value* a = m.abs(xd);
    Value* big = m.gt(a, 1);
    r = m.atan_unit(m.select(big, b.CreateFDiv(m.c(1), a), a));
    r = m.copysign(m.select(big, b.CreateFSub(m.c(M_PI_2), r), r), xd);
  } else {
    Value* root = m.call(llvm::Intrinsic::sqrt, m.fma(b.CreateFNeg(xd), xd, m.c(1)));
    r = op == OpCode::kAsin ? m.atan2(xd, root) : m.atan2(root, xd);
  }
  return b.CreateFPTrunc(r, x->getType());
}

}  // namespace

Value* emit_math(llvm::IRBuilder<>& b, OpCode op, Value* x) {
  Math m(b, x->getType());
  switch (op) {
    case OpCode::kExp:
      return m.exp(x);
    case OpCode::kLog:
      return m.is_f64() ? emit_log_f64(b, x) : m.log_f32(x);
    case OpCode::kExp2:
      return m.is_f64() ? m.exp2_f64(x) : m.exp2_f32(x);
    case OpCode::kLog2:
      return m.is_f64() ? m.log2_f64(x) : m.log2_f32(x);
    case OpCode::kTanh:
      return m.tanh(x);
    case OpCode::kSigmoid:
      return m.sigmoid(x);
    case OpCode::kSinh:
      return m.sinh(x);
    case OpCode::kCosh:
      return m.cosh(x);
    case OpCode::kLog1p:
      return emit_log1p_f32(b, x);
    case OpCode::kExpm1:
      return emit_expm1_f32(b, x);
    case OpCode::kTan:
      return emit_tan_f32(b, x);
    case OpCode::kAtan:
    case OpCode::kAsin:
    case OpCode::kAcos:
      return emit_inverse_trig_f32(b, op, x);
    case OpCode::kErf:
      return m.erf_f32(x);
    case OpCode::kSin:
      return m.sin_cos_f32(x, false);
    case OpCode::kCos:
      return m.sin_cos_f32(x, true);
    default:
      TESSEL_CHECK(false, "not a math opcode");
  }
  return nullptr;
}

// atan2(y, x) in f64 (Math::atan2), rounded once.
Value* emit_atan2_f32(llvm::IRBuilder<>& b, Value* y, Value* x) {
  Math m(b, b.getDoubleTy());
  return b.CreateFPTrunc(m.atan2(b.CreateFPExt(y, b.getDoubleTy()), b.CreateFPExt(x, b.getDoubleTy())), y->getType());
}

// In f64: exp(y log|x|) is within 2^-45 relative of x^y wherever that is a
// finite, nonzero f32, so the one rounding to f32 decides. C's special
// cases: x^0 = 1 and 1^y = 1 even for NaN; a negative finite x needs an
// integer y; an odd y keeps a negative x's sign (-0 and -inf too);
// (-1)^+-inf = 1.
Value* emit_pow_f32(llvm::IRBuilder<>& b, Value* x, Value* y) {
  llvm::Type* f64 = b.getDoubleTy();
  Math m(b, f64);
  Value* xd = b.CreateFPExt(x, f64);
  Value* yd = b.CreateFPExt(y, f64);
  Value* ax = m.abs(xd);
  Value* r = emit_exp_f64(b, b.CreateFMul(yd, emit_log_f64(b, ax)));
  Value* integer = b.CreateFCmpOEQ(m.call(llvm::Intrinsic::floor, yd), yd);
  Value* half = b.CreateFMul(yd, m.c(0.5));
  Value* odd = b.CreateAnd(integer, b.CreateFCmpONE(m.call(llvm::Intrinsic::floor, half), half));
  Value* negative = b.CreateICmpSLT(b.CreateBitCast(x, b.getInt32Ty()), b.getInt32(0));
  r = m.select(b.CreateAnd(negative, odd), b.CreateFNeg(r), r);
  Value* negative_finite = b.CreateAnd(m.lt(xd, 0), b.CreateFCmpOGT(xd, m.c(-INFINITY)));
  r = m.select(b.CreateAnd(negative_finite, b.CreateNot(integer)), m.c(NAN), r);
  r = m.select(b.CreateAnd(b.CreateFCmpOEQ(ax, m.c(1)), b.CreateFCmpOEQ(m.abs(yd), m.c(INFINITY))), m.c(1), r);
  r = m.select(b.CreateFCmpUNO(xd, yd), m.c(NAN), r);
  r = m.select(b.CreateOr(b.CreateFCmpOEQ(yd, m.c(0)), b.CreateFCmpOEQ(xd, m.c(1))), m.c(1), r);
  return b.CreateFPTrunc(r, x->getType());
}

}  // namespace tessel::codegen
