// Free functions of the DSL: tiles, math, memory, TMA and matrix products.
// Each names the op in its diagnostics and takes the caller's location. An
// op records into the builder of its first Value operand; one whose
// operands are all literals (splat(1.0f, {64})) records into the newest
// KernelBuilder alive on the calling thread. The two operands of an
// elementwise op meet in one dtype, an integer with a float in the float,
// the narrower number in the wider, literals in the other operand's
// (docs/guide.md, "Types and promotion"); narrowing is an explicit cast.
#pragma once

#include <initializer_list>
#include <source_location>
#include <utility>
#include <vector>

#include "dsl/builder.h"

namespace tessel {

using Loc = std::source_location;

// Tiles.
Value splat(const Operand& scalar, const Shape& shape, Loc loc = Loc::current());
Value broadcast_to(const Value& x, const Shape& shape, Loc loc = Loc::current());
Value expand_dims(const Value& x, int axis, Loc loc = Loc::current());
Value reshape(const Value& x, const Shape& shape, Loc loc = Loc::current());
Value trans(const Value& x, std::vector<int64_t> perm = {}, Loc loc = Loc::current());
// The `size` elements of x from `start` on along `axis` (torch's narrow): a
// tile of x's rank. In registers it is a choice of the operand's slots, so a
// part of a product's accumulator stays where the product left it.
Value narrow(const Value& x, int axis, int64_t start, int64_t size, Loc loc = Loc::current());
// x's two halves along `axis` (whose size must be even): narrow(x, axis, 0,
// n / 2) and narrow(x, axis, n / 2, n / 2). The rank is kept; Triton's split
// of a last dimension of 2 is split(x, rank - 1) reshaped.
std::pair<Value, Value> split(const Value& x, int axis, Loc loc = Loc::current());
// a's elements, then b's, along `axis` (torch's cat of two; split's
// inverse): tiles of one dtype and rank whose other sizes are equal.
// Triton's join(a, b) is concat(expand_dims(a, r), expand_dims(b, r), r).
Value concat(const Value& a, const Value& b, int axis, Loc loc = Loc::current());

// Reductions along `axis` (removed from the shape).
Value sum(const Value& x, int axis, Loc loc = Loc::current());
Value max(const Value& x, int axis, Loc loc = Loc::current());
Value min(const Value& x, int axis, Loc loc = Loc::current());
// The i32 position along `axis` (removed) of the first greatest (least)
// element: ties go to the lowest position, a NaN loses to a number as in
// max and min, and where every element is NaN the answer is 0.
Value argmax(const Value& x, int axis, Loc loc = Loc::current());
Value argmin(const Value& x, int axis, Loc loc = Loc::current());

// Inclusive scans along `axis` (the shape kept): element i along the axis
// combines elements 0 to i in order, or with `reverse` elements i to the
// last. Integers wrap; f16 and bf16 accumulate in f32 and round each
// result; in cummax and cummin a NaN loses to a number, and a run of NaNs
// at the start gives -inf (+inf), as max and min of them do.
Value cumsum(const Value& x, int axis, bool reverse = false, Loc loc = Loc::current());
Value cumprod(const Value& x, int axis, bool reverse = false, Loc loc = Loc::current());
Value cummax(const Value& x, int axis, bool reverse = false, Loc loc = Loc::current());
Value cummin(const Value& x, int axis, bool reverse = false, Loc loc = Loc::current());

// Each line of `x` along `axis` in ascending order, or descending with
// `descending` (the shape kept); any length, every dtype but i1. A NaN
// counts above every number: last ascending, first descending. The order
// is total, so the result is the same on every target: -0 comes just
// before +0, and NaNs (positive ones first) in the order of their bits.
Value sort(const Value& x, int axis, bool descending = false, Loc loc = Loc::current());
// The i32 positions along `axis` that put each line in sort's order:
// element i of a line is the position of the line's i-th element in that
// order, equal elements (NaNs, -0 and +0 among them) keeping their order
// (a stable sort). The top k of a row are its first k positions.
Value argsort(const Value& x, int axis, bool descending = false, Loc loc = Loc::current());
// The elements of `src` that `index` picks along `axis`: out[..., i, ...] =
// src[..., index[..., i, ...], ...] (torch.gather, Triton's tl.gather).
// `index` is a tile of integers of src's rank, equal to src in every other
// dimension, and the result has index's shape and src's dtype. An index
// outside [0, src's size along the axis) gives 0 (false for i1). With
// argsort, a row's top k: gather(x, gather(order, first_k, 1), 1), where
// first_k holds 0 ... k - 1 in each row.
Value gather(const Value& src, const Value& index, int axis, Loc loc = Loc::current());
// A reduction by a combine function of your own (Triton's tl.reduce):
// the tiles `xs`, of one shape, reduced together along `axis` (removed;
// a scalar each from a 1-D tile). combine(a, b) takes two tuples of
// scalars, one element of each tile in each, and returns their
// combination, one scalar per tile in its dtype. It may use elementwise
// ops, constants and scalars from outside, and must be associative and
// commutative: targets combine in different orders (a thread's elements
// in turn, then trees across lanes and warps), so a floating-point combine
// may round differently between them, while exact ones (integers,
// minimum and maximum, comparisons that break ties by index) agree. An
// argmax that keeps the lowest index of the largest value:
//   reduce({x, idx}, 1, [](auto a, auto b) {
//     Value take_b = b[0] > a[0] | (b[0] == a[0] & b[1] < a[1]);
//     return std::vector<Value>{where(take_b, b[0], a[0]), where(take_b, b[1], a[1])};
//   });
using CombineFn = std::function<std::vector<Value>(std::span<const Value> a, std::span<const Value> b)>;
std::vector<Value> reduce(const std::vector<Value>& xs, int axis, const CombineFn& combine, Loc loc = Loc::current());
// One tile, combine(a, b) of two scalars.
Value reduce(const Value& x, int axis, const std::function<Value(const Value& a, const Value& b)>& combine,
             Loc loc = Loc::current());
// An inclusive scan by a combine function of your own (Triton's
// tl.associative_scan): the tiles `xs`, of one shape, scanned together
// along `axis` (their shapes kept). Element i along the axis combines the
// elements 0 to i in order, or i to the last with `reverse`, and the first
// element of a line is its own result. combine(a, b) is as in reduce, with
// `a` the tuple of the elements earlier in the scan's order and `b` the
// later ones; it must be associative but need not be commutative, since
// every target keeps that order. Targets group the combines differently (a
// thread's elements in turn, then trees across lanes and warps), so a
// floating-point combine may round differently between them. The linear
// recurrence h_i = a_i h_(i-1) + b_i of a state-space model:
//   associative_scan({a, b}, 1, [](auto first, auto then) {
//     return std::vector<Value>{first[0] * then[0], then[0] * first[1] + then[1]};
//   });  // [1]: h
std::vector<Value> associative_scan(const std::vector<Value>& xs, int axis, const CombineFn& combine,
                                    bool reverse = false, Loc loc = Loc::current());
// One tile, combine(a, b) of two scalars.
Value associative_scan(const Value& x, int axis, const std::function<Value(const Value& a, const Value& b)>& combine,
                       bool reverse = false, Loc loc = Loc::current());

// How many elements of `x` (a tile of integers, any shape) equal each of
// 0 ... bins - 1: a tile<i32>[bins] (Triton's tl.histogram). Elements
// outside [0, bins) are not counted, nor, with `mask` (i1, broadcast to
// x's shape), those where it is false. An MoE's tokens per expert:
// histogram(experts, num_experts).
Value histogram(const Value& x, int64_t bins, Loc loc = Loc::current());
Value histogram(const Value& x, int64_t bins, const Operand& mask, Loc loc = Loc::current());

// Elementwise.
Value cast(const Operand& x, DType to, Loc loc = Loc::current());
// x's bits as `to`, a number type of the same width (Triton's
// cast(x, to, bitcast=True)): f32 to i32 or u32, bf16 to u16, f8e4m3 to u8.
Value bitcast(const Operand& x, DType to, Loc loc = Loc::current());
Value select(const Operand& cond, const Operand& a, const Operand& b, Loc loc = Loc::current());
// select by another name: cond ? a : b elementwise.
Value where(const Operand& cond, const Operand& a, const Operand& b, Loc loc = Loc::current());
// Of integers or floats (for floats a NaN operand loses to a number).
Value minimum(const Operand& a, const Operand& b, Loc loc = Loc::current());
Value maximum(const Operand& a, const Operand& b, Loc loc = Loc::current());
// minimum(maximum(x, lo), hi).
Value clamp(const Operand& x, const Operand& lo, const Operand& hi, Loc loc = Loc::current());
Value abs(const Operand& x, Loc loc = Loc::current());  // integers too
Value sqrt(const Operand& x, Loc loc = Loc::current());
Value rsqrt(const Operand& x, Loc loc = Loc::current());
Value floor(const Operand& x, Loc loc = Loc::current());
Value ceil(const Operand& x, Loc loc = Loc::current());
// To the nearest integer, halfway cases away from zero (C's round).
Value round(const Operand& x, Loc loc = Loc::current());
Value fma(const Operand& a, const Operand& b, const Operand& c, Loc loc = Loc::current());

// Math functions of floats (f16 and bf16 are computed in f32). kAccurate,
// the default, is one expansion on every target, within a few ulp and
// bit-identical between the host and GPUs; kFast is the target's hardware
// approximation where it has one (NVIDIA's MUFU, AMD's transcendental
// unit; on the host the accurate form). docs/math.md has the error of each.
enum class MathForm { kAccurate, kFast };
Value exp(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value exp2(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value log(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value log2(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value tanh(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value sin(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value cos(const Operand& x, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
Value sigmoid(const Operand& x, Loc loc = Loc::current());  // 1 / (1 + exp(-x))
Value erf(const Operand& x, Loc loc = Loc::current());
Value sinh(const Operand& x, Loc loc = Loc::current());
Value cosh(const Operand& x, Loc loc = Loc::current());
// log(1 + x) and exp(x) - 1, accurate where x is near 0 (softplus, ELU).
Value log1p(const Operand& x, Loc loc = Loc::current());
Value expm1(const Operand& x, Loc loc = Loc::current());
// tan, and the inverse functions: asin and acos of [-1, 1] (NaN outside),
// atan, and atan2(y, x), the angle of the point (x, y) in [-pi, pi] with
// C's signed zeros and infinities.
Value tan(const Operand& x, Loc loc = Loc::current());
Value asin(const Operand& x, Loc loc = Loc::current());
Value acos(const Operand& x, Loc loc = Loc::current());
Value atan(const Operand& x, Loc loc = Loc::current());
Value atan2(const Operand& y, const Operand& x, Loc loc = Loc::current());
// x^y with C's special cases (a negative x needs an integer y).
Value pow(const Operand& x, const Operand& y, Loc loc = Loc::current());
// a / b; MathForm::kFast (floats only) allows an error of 2 ulp for the
// GPU's fast division (NVIDIA div.full.f32, AMD v_rcp_f32 times a), as
// Triton's `/` on f32; the host divides exactly either way.
Value div(const Operand& a, const Operand& b, MathForm form = MathForm::kAccurate, Loc loc = Loc::current());
// ceil(a / b) for positive integers.
Value cdiv(const Operand& a, const Operand& b, Loc loc = Loc::current());

// Memory through pointers (scalars or tiles of pointers).
Value load(const Operand& ptrs, Loc loc = Loc::current());
Value load(const Operand& ptrs, const Operand& mask, const Operand& other, Loc loc = Loc::current());
void store(const Operand& ptrs, const Operand& value, Loc loc = Loc::current());
void store(const Operand& ptrs, const Operand& value, const Operand& mask, Loc loc = Loc::current());

enum class AtomicOp { kAdd, kMin, kMax, kAnd, kOr, kXor, kExchange };
// How an atomic orders the program's other memory accesses, at device
// scope. The order is the whole program's, not one thread's: with
// kRelease (or kAcqRel), everything the program wrote before the atomic
// (stores, tma_store and tma_reduce included) is visible to any program
// that reads the atomic's result, or a later value of the same location,
// with kAcquire (or kAcqRel); with kAcquire, the program's reads after the
// atomic (loads and tma_load) see what such a release made visible.
// kRelaxed only makes the update atomic: a work counter, a histogram.
// A program that counts itself into a shared counter and, when it is the
// last, reads what every program wrote, needs the default kAcqRel.
enum class MemoryOrder { kRelaxed, kAcquire, kRelease, kAcqRel };
inline bool releases(MemoryOrder o) { return o == MemoryOrder::kRelease || o == MemoryOrder::kAcqRel; }
inline bool acquires(MemoryOrder o) { return o == MemoryOrder::kAcquire || o == MemoryOrder::kAcqRel; }
// "add", ..., "exchange" and "relaxed", ..., "acq_rel" (as printed in the IR);
// "?" for a value outside the enum.
const char* atomic_op_name(AtomicOp op);
const char* memory_order_name(MemoryOrder order);
// Atomically combines `value` into memory at device scope; returns the old values.
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, Loc loc = Loc::current());
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, MemoryOrder order, Loc loc = Loc::current());
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, const Operand& mask,
                 Loc loc = Loc::current());
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, const Operand& mask, MemoryOrder order,
                 Loc loc = Loc::current());
Value atomic_add(const Operand& ptrs, const Operand& value, Loc loc = Loc::current());
Value atomic_add(const Operand& ptrs, const Operand& value, MemoryOrder order, Loc loc = Loc::current());
// Compare-and-swap on one scalar pointer; returns the old value.
Value atomic_cas(const Operand& ptr, const Operand& compare, const Operand& value, Loc loc = Loc::current());
Value atomic_cas(const Operand& ptr, const Operand& compare, const Operand& value, MemoryOrder order,
                 Loc loc = Loc::current());

// Debugging. device_print writes a line per element (per program for
// scalars): "pid (x, y, z) idx (i, j) prefix v0, v1", the values
// broadcast to one shape (at most 16). The lines reach stdout once the
// launch's work is done: after a host launch, and at the synchronize that
// waits for a GPU's (Device::synchronize, Stream::synchronize). A launch
// prints at most about a MiB of records (40 bytes, and 8 a value, a line);
// a line says how many more were dropped.
// device_assert checks that every element of an i1 `cond` holds when the
// kernel is compiled with CompileOptions::debug (TESSEL_DEBUG=1); otherwise
// it is compiled away. The first failure is reported as an error naming the
// message, the call's line, the program and the element: by the host
// launch, or by a GPU's next synchronize. A failing program stops there,
// except in kernels with asynchronous copies that may be in flight (TMA
// loads, copy rings, warp specialization, clusters), where it records the
// failure and runs on.
void device_print(absl::string_view prefix, std::initializer_list<Operand> values = {}, Loc loc = Loc::current());
void device_print(absl::string_view prefix, const std::vector<Value>& values, Loc loc = Loc::current());
void device_assert(const Operand& cond, absl::string_view message, Loc loc = Loc::current());

// TMA: coordinates are outermost first, like the box. Out-of-bounds parts
// of a box read zeros and are clipped on store.
Value tma_load(const Value& map, std::initializer_list<Operand> coords, Loc loc = Loc::current());
Value tma_load(const Value& map, const std::vector<Operand>& coords, Loc loc = Loc::current());
// In a kernel of clusters (KernelBuilder::cluster) of C programs: the
// C boxes at coords, coords + box[0] along dim 0, ..., stacked along dim 0
// (a tile C times the box's size there), which the cluster's programs load
// together: on a GPU with clusters, program r loads box r once and the copy
// engine writes it into every program's tile (NVIDIA's TMA multicast). So
// every program of a cluster must reach the same tma_multicast with the
// same coordinates, in the same order; elsewhere each program loads all C
// boxes itself. The box's rows must fill whole 1 KiB blocks of shared
// memory (128-byte blocks where it is not swizzled), so that each box
// lands where the tile's layout puts it.
Value tma_multicast(const Value& map, std::initializer_list<Operand> coords, Loc loc = Loc::current());
Value tma_multicast(const Value& map, const std::vector<Operand>& coords, Loc loc = Loc::current());
void tma_store(const Value& map, std::initializer_list<Operand> coords, const Value& tile, Loc loc = Loc::current());
void tma_store(const Value& map, const std::vector<Operand>& coords, const Value& tile, Loc loc = Loc::current());
// The same, combining the tile into the box's elements instead of
// replacing them (only AtomicOp::kAdd, into f32, f16, bf16 or i32 maps):
// each element's add is atomic, so programs may reduce into the same box,
// in no set order (float sums may differ in their last bits between runs).
// On NVIDIA the copy engine adds (cp.reduce.async.bulk.tensor); elsewhere,
// atomic adds. A split-K GEMM's programs add their partial tiles this way.
void tma_reduce(AtomicOp op, const Value& map, std::initializer_list<Operand> coords, const Value& tile,
                Loc loc = Loc::current());
void tma_reduce(AtomicOp op, const Value& map, const std::vector<Operand>& coords, const Value& tile,
                Loc loc = Loc::current());

// How a dot multiplies f32 operands: exactly (kIeee), or with each operand
// rounded to tf32 first (10 mantissa bits, f32's range), which Hopper's
// tensor cores multiply at 8x the speed. Other dtypes take kIeee only.
enum class Precision { kIeee, kTf32 };

// acc + a @ b for a [M, K], b [K, N], acc [M, N]. Operands and accumulator:
// f16 -> f32 or f16, bf16 -> f32, f32 -> f32, f64 -> f64, i8 -> i32, and
// f8e4m3 / f8e5m2 -> f32 (a and b may mix the two fp8 kinds). On sm_90a a dot
// whose operands are swizzled TMA boxes runs on the tensor cores; fp8 there
// needs both operands K-major (a stored [M, K], b given as trans of an
// [N, K] box).
Value dot(const Value& a, const Value& b, const Value& acc, Loc loc = Loc::current());
Value dot(const Value& a, const Value& b, const Value& acc, Precision precision, Loc loc = Loc::current());

}  // namespace tessel
