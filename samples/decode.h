// Attention for decoding (flash-decoding) over a paged KV cache, with
// grouped query heads: each sequence of a batch has one new query per head,
// which attends to the sequence's own keys and values, held in pages of a
// cache the sequences share and found through the sequence's row of a
// block table (vLLM's paged attention).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// q [batch, kv_heads * group, d] (query head h reads KV head h / group);
// the caches [pages, page, kv_heads, d] (FlashAttention's paged layout);
// block_table [batch, max_pages] i32, the pages of each sequence in order;
// lens [batch] i32, each sequence's keys; o like q.
//
// A program takes one KV head of one sequence and one split of its keys.
// The group's query heads are the rows of a [rows, d] tile (group rounded
// up to 16, the rows past it zero), so the keys and values they share are
// read once for all of them, and S = Q K^T and P V run on the tensor cores
// (mma.sync on NVIDIA, whose wgmma takes 64 rows). Keys come in blocks of
// bn, each key's row found through the block table; on NVIDIA GPUs they go
// through copy rings, the table's entries for a block read as its copies
// are issued, stages - 1 blocks ahead. Splitting the keys (flash-decoding)
// gives a batch of few sequences enough programs to fill a GPU: each split
// writes its rows' output and log2-sum-exp to a workspace, and the last
// split of a KV head to finish (counted by an acq_rel atomic) combines
// them into o; with one split a program writes o itself.
struct DecodeConfig {
  int64_t d = 128;    // head dimension
  int64_t group = 4;  // query heads per KV head (1: multi-head attention)
  int64_t page = 16;  // keys per page of the cache
  int64_t bn = 64;    // keys per step
  DType in = bf16;    // q and the caches: bf16 or f16
  DType out = bf16;   // o: bf16, f16 or f32
  int stages = 0;     // of the key loop's copy rings; 0: the compiler's default, fewer where shared memory is short
  int warps = 4;
};
inline constexpr int kMaxDecodeSplits = 64;

inline absl::Status check_decode_config(const DecodeConfig& c) {
  auto bad = [](auto... what) { return absl::InvalidArgumentError(absl::StrCat("decode: ", what...)); };
  if (c.d < 16 || c.d > 256 || c.d % 16 != 0) return bad("head dimension d must be a multiple of 16 to 256, got ", c.d);
  if (c.group < 1 || c.group > 64) return bad("group (query heads per KV head) must be 1 to 64, got ", c.group);
  if (c.page < 1) return bad("page (keys per page) must be positive, got ", c.page);
  if (c.bn < 16 || c.bn > 256 || c.bn % 16 != 0)
    return bad("bn (keys per step) must be a multiple of 16 to 256, got ", c.bn);
  if (c.in != bf16 && c.in != f16) return bad("q and the caches must be bf16 or f16, got ", c.in.name());
  if (c.out != bf16 && c.out != f16 && c.out != f32) return bad("o must be bf16, f16 or f32, got ", c.out.name());
  if (c.stages < 0 || c.stages > 8) return bad("stages must be 0 (the default) to 8, got ", c.stages);
  if (c.warps < 1 || c.warps > 16) return bad("warps must be 1 to 16, got ", c.warps);
  return absl::OkStatus();
}

// The query rows a program takes: the group, rounded up to the tensor
// cores' 16.
inline int64_t decode_rows(const DecodeConfig& c) { return std::max<int64_t>(16, (c.group + 15) / 16 * 16); }

// Args: q, k_cache, v_cache, block_table, lens, o; o_part [batch,
// kv_heads * group, splits, d] f32, lse_part [batch, kv_heads * group,
// splits] f32 and counts [batch, kv_heads] i32 (zero at the start, and left
// zero), the splits' workspace; kv_heads, max_pages, splits, chunk (keys a
// split, a multiple of bn), all i32; scale (f32). Keys past max_pages *
// page are not read. A sequence without keys gets zeros.
inline absl::StatusOr<Kernel> decode_kernel(const DecodeConfig& c, std::string name = "decode") {
  TESSEL_RETURN_IF_ERROR(check_decode_config(c));
  const int64_t rows = decode_rows(c);
  KernelBuilder k(std::move(name));
  Value q = k.arg(ptr(c.in), "q"), kc = k.arg(ptr(c.in), "k_cache"), vc = k.arg(ptr(c.in), "v_cache");
  Value table = k.arg(ptr(i32), "block_table"), lens = k.arg(ptr(i32), "lens");
  Value o = k.arg(ptr(c.out), "o");
  Value o_part = k.arg(ptr(f32), "o_part"), lse_part = k.arg(ptr(f32), "lse_part");
  Value counts = k.arg(ptr(i32), "counts");
  Value kv_heads = k.arg(i32, "kv_heads"), max_pages = k.arg(i32, "max_pages");
  Value splits = k.arg(i32, "splits"), chunk = k.arg(i32, "chunk");
  Value scale = k.arg(f32, "scale");
  Value log2_scale = scale * static_cast<float>(M_LOG2E);  // exp(x * scale) = exp2(x * log2_scale)

  Value split = k.program_id() % splits, pair = k.program_id() / splits;  // pair: b * kv_heads + KV head
  Value b = pair / kv_heads, kvh = pair % kv_heads;
  Value in_group = k.arange(0, rows) < c.group;                             // [rows]
  Value head = cast(pair * c.group + k.arange(0, rows), i64);               // [rows]: rows of q and o
  Value dims = expand_dims(k.arange(0, c.d), 0);                            // [1, d]
  Value group_rows = expand_dims(in_group, 1);                              // [rows, 1]
  Value qt = load(q + expand_dims(head * c.d, 1) + dims, group_rows, 0.0);  // [rows, d]
  Value len = minimum(load(lens + b), max_pages * c.page);
  Value start = split * chunk, end = minimum(len, start + chunk);
  Value pages = table + cast(b, i64) * cast(max_pages, i64);  // the sequence's row of the table

  Var m = k.var(k.full({rows}, -INFINITY, f32));  // running maximum
  // The running sum, per column of a step: summed across the row once,
  // after the loop (a step's columns lie across the warps, whose sums
  // would otherwise meet in shared memory every step).
  Var l_cols = k.var(k.zeros({rows, c.bn}, f32));
  Var acc = k.var(k.zeros({rows, c.d}, f32));
  k.for_range(start, end, c.bn,
              [&](Value j) {
                Value key = j + k.arange(0, c.bn), seen = key < end;  // [bn]
                Value page = load(pages + key / c.page, seen, 0);
                Value slot = cast(page, i64) * c.page + cast(key % c.page, i64);
                Value at = expand_dims((slot * kv_heads + kvh) * c.d, 1) + dims;  // [bn, d]: the keys' rows
                Value kt = load(kc + at, expand_dims(seen, 1), 0.0);
                Value s = dot(qt, trans(kt), k.zeros({rows, c.bn}, f32));
                s = select(expand_dims(seen, 0), s, -INFINITY);
                Value m_new = maximum(m, max(s, 1));
                Value m_scaled = m_new * log2_scale;
                Value p = exp2(fma(s, log2_scale, expand_dims(-m_scaled, 1)), MathForm::kFast);
                Value alpha = exp2(m * log2_scale - m_scaled, MathForm::kFast);
                l_cols = l_cols * expand_dims(alpha, 1) + p;
                Value vt = load(vc + at, expand_dims(seen, 1), 0.0);
                acc = dot(cast(p, c.in), vt, acc * expand_dims(alpha, 1));
                m = m_new;
              },
              {.stages = c.stages});

  Value l = sum(l_cols, 1);
  Value live = l > 0.0f;  // [rows]: the split had keys
  Value out = acc * expand_dims(select(live, 1.0f / l, 0.0f), 1);
  Value out_at = expand_dims(head * c.d, 1) + dims;
  k.if_(
      splits == 1, [&] { store(o + out_at, cast(out, c.out), group_rows); },
      [&] {
        Value part = head * splits + split;  // [rows]
        store(o_part + expand_dims(part * c.d, 1) + dims, out, group_rows);
        store(lse_part + part, select(live, m * log2_scale + log2(l), -INFINITY), in_group);
        // The last split to count itself in combines every split's part.
        Value done = atomic_add(counts + pair, 1);
        k.if_(done == splits - 1, [&] {
          store(counts + pair, 0);
          Var top = k.var(k.full({rows}, -INFINITY, f32));
          Var total = k.var(k.zeros({rows}, f32));
          Var sum_o = k.var(k.zeros({rows, c.d}, f32));
          k.for_range(0, splits, 1, [&](Value s) {
            Value at = head * splits + s;
            Value lse = load(lse_part + at, in_group, -INFINITY);
            Value os = load(o_part + expand_dims(at * c.d, 1) + dims, group_rows, 0.0f);
            Value top_new = maximum(top, lse), none = top_new == -INFINITY;
            Value keep = select(none, 0.0f, exp2(top - top_new)), weight = select(none, 0.0f, exp2(lse - top_new));
            total = total * keep + weight;
            sum_o = sum_o * expand_dims(keep, 1) + os * expand_dims(weight, 1);
            top = top_new;
          });
          Value done_o = sum_o * expand_dims(select(total > 0.0f, 1.0f / total, 0.0f), 1);
          store(o + out_at, cast(done_o, c.out), group_rows);
        });
      });
  return k.build();
}

// Splits of each sequence's keys: enough programs for `programs` (a few
// per compute unit), each split at least four blocks of bn keys where the
// keys allow, at most kMaxDecodeSplits.
inline int decode_splits(const DecodeConfig& c, int64_t batch, int64_t kv_heads, int64_t max_len, int64_t programs) {
  const int64_t pairs = std::max<int64_t>(1, batch * kv_heads);
  const int64_t blocks = std::max<int64_t>(1, (max_len + c.bn - 1) / c.bn);
  const int64_t wanted = (programs + pairs - 1) / pairs;
  return static_cast<int>(std::clamp<int64_t>(std::min(wanted, blocks / 4), 1, kMaxDecodeSplits));
}

// decode_kernel compiled for a batch of sequences on `batch` x `kv_heads`,
// with its workspace: run() computes o for a block table of `max_pages`
// pages a sequence. `splits` 0 chooses decode_splits for the device;
// `options` are the compile's, their warps c's.
class Decode {
 public:
  static absl::StatusOr<Decode> compile(const Device& dev, const DecodeConfig& c, int64_t batch, int64_t kv_heads,
                                        int64_t max_pages, int splits = 0, CompileOptions options = {}) {
    TESSEL_RETURN_IF_ERROR(check_decode_config(c));
    if (batch < 1 || kv_heads < 1 || max_pages < 1) {
      return absl::InvalidArgumentError(absl::StrCat("decode: batch, kv_heads and max_pages must be positive, got ",
                                                     batch, ", ", kv_heads, " and ", max_pages));
    }
    const int64_t max_len = max_pages * c.page;
    if (batch * kv_heads * c.group * c.d > int64_t{1} << 31 || max_len >= int64_t{1} << 31) {
      return absl::InvalidArgumentError(absl::StrCat("decode: ", batch, " sequences of ", kv_heads * c.group,
                                                     " heads and ", max_len, " keys are past 32-bit indices"));
    }
    if (splits < 0 || splits > kMaxDecodeSplits) {
      return absl::InvalidArgumentError(
          absl::StrCat("decode: splits must be 1 to ", kMaxDecodeSplits, " (or 0 to choose), got ", splits));
    }
    if (splits == 0) splits = decode_splits(c, batch, kv_heads, max_len, 4 * int64_t{dev.num_compute_units()});
    TESSEL_ASSIGN_OR_RETURN(Kernel kernel, decode_kernel(c));
    options.num_warps = c.warps;
    TESSEL_ASSIGN_OR_RETURN(Function fn, dev.compile(kernel, options));
    Decode d(std::move(fn));
    d.c_ = c;
    d.batch_ = batch, d.kv_heads_ = kv_heads, d.max_pages_ = max_pages, d.splits_ = splits;
    const int64_t per_split = (max_len + splits - 1) / splits;
    d.chunk_ = (per_split + c.bn - 1) / c.bn * c.bn;
    const int64_t heads = batch * kv_heads * c.group;
    if (splits > 1) {
      TESSEL_ASSIGN_OR_RETURN(d.o_part_, dev.allocate(heads * splits * c.d * 4));
      TESSEL_ASSIGN_OR_RETURN(d.lse_part_, dev.allocate(heads * splits * 4));
      TESSEL_ASSIGN_OR_RETURN(d.counts_, dev.allocate(batch * kv_heads * 4));
      const std::vector<int32_t> zeros(batch * kv_heads, 0);
      TESSEL_RETURN_IF_ERROR(dev.copy_to_device(d.counts_, zeros.data(), zeros.size() * 4));
    } else {  // (read by no program)
      TESSEL_ASSIGN_OR_RETURN(d.o_part_, dev.allocate(4));
      d.lse_part_ = d.counts_ = d.o_part_;
    }
    return d;
  }

  // o = softmax(q k^T * scale) v for each query head over its sequence's
  // keys. The buffers as decode_kernel's; the caches of any number of pages
  // (the table's entries must be below it). One run at a time: runs share
  // the workspace.
  absl::Status run(const Buffer& q, const Buffer& k_cache, const Buffer& v_cache, const Buffer& block_table,
                   const Buffer& lens, const Buffer& o, float scale, const Stream* stream = nullptr) const {
    const int64_t heads = batch_ * kv_heads_ * c_.group, page_bytes = c_.page * kv_heads_ * c_.d * c_.in.bytes();
    auto small = [](const char* what, const Buffer& buf, int64_t want) -> absl::Status {
      if (static_cast<int64_t>(buf.bytes()) >= want) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("decode: ", what, " holds ", buf.bytes(), " bytes, fewer than the ", want, " it needs"));
    };
    TESSEL_RETURN_IF_ERROR(small("q", q, heads * c_.d * c_.in.bytes()));
    TESSEL_RETURN_IF_ERROR(small("o", o, heads * c_.d * c_.out.bytes()));
    TESSEL_RETURN_IF_ERROR(small("block_table", block_table, batch_ * max_pages_ * 4));
    TESSEL_RETURN_IF_ERROR(small("lens", lens, batch_ * 4));
    TESSEL_RETURN_IF_ERROR(small("k_cache (one page)", k_cache, page_bytes));
    if (k_cache.bytes() != v_cache.bytes() || k_cache.bytes() % page_bytes != 0) {
      return absl::InvalidArgumentError(absl::StrCat("decode: k_cache and v_cache must hold the same whole pages of ",
                                                     page_bytes, " bytes, got ", k_cache.bytes(), " and ",
                                                     v_cache.bytes()));
    }
    const LaunchConfig launch{
        .grid = static_cast<int>(batch_ * kv_heads_ * splits_), .num_warps = c_.warps, .stream = stream};
    return fn_.launch(launch, q, k_cache, v_cache, block_table, lens, o, o_part_, lse_part_, counts_,
                      static_cast<int32_t>(kv_heads_), static_cast<int32_t>(max_pages_), static_cast<int32_t>(splits_),
                      static_cast<int32_t>(chunk_), scale);
  }

  const DecodeConfig& config() const { return c_; }
  int splits() const { return splits_; }
  const Function& function() const { return fn_; }

 private:
  explicit Decode(Function fn) : fn_(std::move(fn)) {}
  Function fn_;
  DecodeConfig c_;
  int64_t batch_ = 0, kv_heads_ = 0, max_pages_ = 0, chunk_ = 0;
  int splits_ = 1;
  Buffer o_part_, lse_part_, counts_;
};

// The cache's row (page's slot) of key `key` of sequence `b`, through its
// row of the block table.
inline int64_t decode_slot(const std::vector<int32_t>& table, int64_t b, int64_t max_pages, int64_t page, int64_t key) {
  return int64_t{table[b * max_pages + key / page]} * page + key % page;
}

// One query head's output in doubles into o[0, d): softmax(q k_j^T *
// scale) v_j over keys j < len, `key(j)` and `value(j)` giving rows of d
// elements and `value_of` an element's value (the elements as stored:
// doubles, or bf16 bits).
template <class T, class Keys, class Values, class ValueOf>
void decode_row(const T* q, const Keys& key, const Values& value, int64_t len, int64_t d, double scale,
                const ValueOf& value_of, double* o) {
  std::vector<double> s(len);
  double top = -INFINITY, total = 0;
  for (int64_t j = 0; j < len; ++j) {
    const T* kr = key(j);
    s[j] = 0;
    for (int64_t x = 0; x < d; ++x) s[j] += double{value_of(q[x])} * value_of(kr[x]);
    top = std::max(top, s[j] *= scale);
  }
  for (int64_t j = 0; j < len; ++j) total += s[j] = std::exp(s[j] - top);
  std::fill(o, o + d, 0.0);
  for (int64_t j = 0; j < len; ++j) {
    const T* vr = value(j);
    for (int64_t x = 0; x < d; ++x) o[x] += s[j] / total * value_of(vr[x]);
  }
}

// The doubles decode computes, o [batch, kv_heads * group, d], from q, the
// caches and the table as values (the layouts above).
inline std::vector<double> decode_reference(const std::vector<double>& q, const std::vector<double>& k_cache,
                                            const std::vector<double>& v_cache, const std::vector<int32_t>& table,
                                            const std::vector<int32_t>& lens, int64_t kv_heads, int64_t group,
                                            int64_t d, int64_t page, int64_t max_pages, double scale) {
  const int64_t batch = static_cast<int64_t>(lens.size()), heads = kv_heads * group;
  std::vector<double> o(batch * heads * d, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = std::min<int64_t>(lens[b], max_pages * page);
    for (int64_t h = 0; h < heads; ++h) {
      auto at = [&](int64_t key) { return (decode_slot(table, b, max_pages, page, key) * kv_heads + h / group) * d; };
      decode_row(
          &q[(b * heads + h) * d], [&](int64_t j) { return &k_cache[at(j)]; },
          [&](int64_t j) { return &v_cache[at(j)]; }, len, d, scale, [](double x) { return x; },
          &o[(b * heads + h) * d]);
    }
  }
  return o;
}

}  // namespace samples
