#include "codegen/nvptx/mma_sync.h"

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/tma_rules.h"
#include "codegen/nvptx/mma_sync_fragment.h"
#include "codegen/nvptx/ptx_asm.h"
#include "codegen/nvptx/wgmma.h"
#include "codegen/tile_offset.h"
#include "llvm/IR/IntrinsicsNVPTX.h"

namespace tessel::codegen::nvptx {
namespace {

// An instruction for 16 x 8 blocks and 32 bytes of k: bf16 or f16 (k16,
// either operand transposable by ldmatrix), tf32 (k8), i8 into i32 or fp8
// into f32 (k32). LLVM 19 has no intrinsic for fp8's, which is inline
// assembly of `fp8_types` (".e4m3.e5m2").
struct Form {
  llvm::Intrinsic::ID id;
  int64_t bytes;  // per element
  bool transposable = false;
  std::string fp8_types;
  int64_t k_step() const { return kMmaKBytes / bytes; }
};

std::optional<Form> form_of(const MmaShape& s, bool fp8) {
  if (s.acc == i32 && s.a == i8 && s.b == i8) return Form{llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_s8, 1, false, ""};
  if (fp8 && s.acc == f32 && s.a.is_float8() && s.b.is_float8()) {
    auto kind = [](DType d) { return d == f8e4m3 ? ".e4m3" : ".e5m2"; };
    return Form{llvm::Intrinsic::not_intrinsic, 1, false, absl::StrCat(kind(s.a), kind(s.b))};
  }
  if (s.acc != f32 || s.a != s.b) return std::nullopt;
  if (s.a == bf16 && !s.tf32) return Form{llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16, 2, true, ""};
  if (s.a == f16 && !s.tf32) return Form{llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32, 2, true, ""};
  if (s.a == f32 && s.tf32) return Form{llvm::Intrinsic::nvvm_mma_m16n8k8_row_col_tf32, 4, false, ""};
  return std::nullopt;
}

MmaWarps warps_for(const MmaShape& s, const Form& f, int threads, bool rows_only) {
  return s.k % f.k_step() == 0 ? mma_sync_warps(s.m, s.n, threads, rows_only) : MmaWarps{};
}

// A tile stored as the product reads it: [mn, k] (K-major) or [k, mn]
// (ldmatrix .trans for 16-bit types; element by element for tf32 and i8).
bool fits(const MmaShape& s, const Form& f, const SharedMatrix& op, int64_t mn) {
  if (op.registers) return f.transposable;
  return op.k_major ? op.rows == mn && op.cols == s.k : op.rows == s.k && op.cols == mn;
}

class MmaSyncLayout final : public Layout {
 public:
  MmaSyncLayout(int64_t m, int64_t n, MmaWarps warps) : m_(m), n_(n), warps_(warps) {}

  int64_t numel() const override { return m_ * n_; }
  int threads() const override { return warps_.rows * warps_.cols * 32; }
  int64_t slots() const override { return m_ * n_ / threads(); }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    const int64_t warp_m = m_ / warps_.rows, warp_n = n_ / warps_.cols, blocks_n = warp_n / kMmaCols;
    const int64_t block = slot / kMmaSlots, value = slot % kMmaSlots;
    llvm::Value* warp = b.CreateLShr(thread, 5);
    llvm::Value* lane = b.CreateAnd(thread, 31);
    // The thread's part (the same for every slot), then the slot's constant.
    llvm::Value* row = b.CreateAdd(b.CreateMul(b.CreateUDiv(warp, b.getInt64(warps_.cols)), b.getInt64(warp_m)),
                                   b.CreateLShr(lane, 2));
    llvm::Value* col = b.CreateAdd(b.CreateMul(b.CreateURem(warp, b.getInt64(warps_.cols)), b.getInt64(warp_n)),
                                   b.CreateMul(b.CreateAnd(lane, 3), b.getInt64(2)));
    const int64_t own_row = block / blocks_n * kMmaRows + 8 * (value / 2);
    const int64_t own_col = block % blocks_n * kMmaCols + value % 2;
    return b.CreateAdd(b.CreateAdd(b.CreateMul(row, b.getInt64(n_)), col), b.getInt64(own_row * n_ + own_col));
  }
  llvm::Value* valid(llvm::IRBuilder<>&, llvm::Value*, int64_t) const override { return nullptr; }
  int64_t element_at(int64_t thread, int64_t slot) const override {
    return mma_sync_accumulator_element(m_, n_, warps_, thread, slot);
  }
  bool same_as(const Layout& other) const override {
    auto* o = dynamic_cast<const MmaSyncLayout*>(&other);
    return o != nullptr && o->m_ == m_ && o->n_ == n_ && o->warps_.rows == warps_.rows && o->warps_.cols == warps_.cols;
  }
  // Whole blocks of 8 columns where each warp holds whole rows: the same
  // threads hold them as a fragment of that width.
  std::shared_ptr<const Layout> narrowed(const std::vector<int64_t>& shape, int axis, int64_t start,
                                         int64_t size) const override {
    if (shape != std::vector<int64_t>{m_, n_} || axis != 1 || warps_.cols != 1 || start % kMmaCols != 0 ||
        size % kMmaCols != 0) {
      return nullptr;
    }
    return std::make_shared<MmaSyncLayout>(m_, size, warps_);
  }

 private:
  int64_t m_, n_;
  MmaWarps warps_;
};

}  // namespace

std::shared_ptr<const Layout> mma_sync_accumulator_layout(int64_t m, int64_t n, MmaWarps warps) {
  return std::make_shared<MmaSyncLayout>(m, n, warps);
}

std::shared_ptr<const Layout> mma_sync_layout(const MmaShape& s, const SharedMatrix& a, const SharedMatrix& b,
                                              int threads, bool fp8) {
  const std::optional<Form> f = form_of(s, fp8);
  if (!f) return nullptr;
  const MmaWarps warps = warps_for(s, *f, threads, a.registers);
  if (warps.rows == 0 || !fits(s, *f, a, s.m) || !fits(s, *f, b, s.n) || b.registers) return nullptr;
  return mma_sync_accumulator_layout(s.m, s.n, warps);
}

std::shared_ptr<const Layout> mma_sync_register_a_layout(const MmaShape& s, const SharedMatrix& b, int threads,
                                                         bool fp8) {
  const std::optional<Form> f = form_of(s, fp8);
  if (!f || !f->transposable) return nullptr;
  const MmaWarps warps = warps_for(s, *f, threads, /*rows_only=*/true);
  if (warps.rows == 0 || !fits(s, *f, b, s.n) || s.m / warps.rows * s.k / 32 > kMmaMaxSlots) return nullptr;
  return mma_sync_accumulator_layout(s.m, s.k, warps);
}

llvm::Value* ldmatrix_lane_offset(llvm::IRBuilder<>& b, const StoredOperand& op, LdmatrixLanes lanes, int64_t mn,
                                  int64_t k, llvm::Value* origin, llvm::Value* lane) {
  llvm::Value* q = b.CreateAnd(b.CreateLShr(lane, 3), 3);
  llvm::Value* r = b.CreateAnd(lane, 7);
  llvm::Value* low = b.CreateAnd(q, 1);
  llvm::Value* high = b.CreateLShr(q, 1);
  const bool a = lanes == LdmatrixLanes::kA;
  // a: matrix q at 8 (q % 2) along m, 16 (q / 2) bytes along k; b the other
  // way round; a last block of b at 16 (q % 2) bytes.
  llvm::Value* at_mn = b.CreateAdd(origin, b.getInt64(mn));
  if (lanes != LdmatrixLanes::kLastB) at_mn = b.CreateAdd(at_mn, b.CreateShl(a ? low : high, 3));
  llvm::Value* at_k = b.CreateAdd(b.getInt64(k), b.CreateMul(a ? high : low, b.getInt64(16 / op.bytes)));
  llvm::Value* row = op.k_major ? b.CreateAdd(at_mn, r) : b.CreateAdd(at_k, r);
  llvm::Value* col = op.k_major ? at_k : at_mn;
  return tile_offset(b, row, col, op.rows, op.cols, op.bytes, op.swizzle);
}

namespace {

// One ldmatrix of an operand: the block at `mn` along m or n from the
// warp's first row or column, and at element `k`.
struct Load {
  LdmatrixLanes lanes;
  int64_t mn, k;
};

StoredOperand stored(const SharedMatrix& op, int64_t bytes) {
  return {.rows = op.rows, .cols = op.cols, .bytes = bytes, .k_major = op.k_major, .swizzle = op.swizzle};
}
int64_t lane_offset(const StoredOperand& op, const Load& load, int64_t origin, int64_t lane) {
  return ldmatrix_lane_offset(op, load.lanes, load.mn, load.k, origin, lane);
}

// The loads of an operand that share a base register: each at the first's
// address plus an immediate, the same for every lane of every warp.
struct LoadGroup {
  Load first;
  std::vector<std::pair<Load, int64_t>> loads;  // with their immediates
};

// Groups `loads` by the bases they can share, checked lane by lane for the
// warps whose blocks start at `origins`: under a swizzle, loads whose
// 16-byte chunks sit at different places within 128 bytes need bases of
// their own.
std::vector<LoadGroup> group_loads(const StoredOperand& op, const std::vector<Load>& loads,
                                   const std::vector<int64_t>& origins) {
  std::vector<LoadGroup> groups;
  for (const Load& load : loads) {
    auto shared_base = [&](const LoadGroup& g) -> std::optional<int64_t> {
      if (g.first.lanes != load.lanes) return std::nullopt;
      const int64_t imm = lane_offset(op, load, origins[0], 0) - lane_offset(op, g.first, origins[0], 0);
      if (imm < 0) return std::nullopt;
      for (int64_t origin : origins) {
        for (int64_t lane = 0; lane < 32; ++lane) {
          if (lane_offset(op, load, origin, lane) - lane_offset(op, g.first, origin, lane) != imm) {
            return std::nullopt;
          }
        }
      }
      return imm;
    };
    bool placed = false;
    for (LoadGroup& g : groups) {
      if (std::optional<int64_t> imm = shared_base(g)) {
        g.loads.push_back({load, *imm});
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back(LoadGroup{load, {{load, 0}}});
  }
  return groups;
}

}  // namespace

std::vector<llvm::Value*> emit_mma_sync(llvm::IRBuilder<>& b, const MmaShape& s, const SharedMatrix& a,
                                        const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* tid,
                                        int threads, bool fp8) {
  const Form f = *form_of(s, fp8);
  const MmaWarps warps = warps_for(s, f, threads, a.registers);
  const int64_t warp_m = s.m / warps.rows, warp_n = s.n / warps.cols;
  const int64_t blocks_m = warp_m / kMmaRows, blocks_n = warp_n / kMmaCols, step = f.k_step();
  llvm::Value* warp = b.CreateLShr(tid, 5);
  llvm::Value* lane = b.CreateAnd(tid, 31);
  llvm::Value* row0 = b.CreateMul(b.CreateUDiv(warp, b.getInt64(warps.cols)), b.getInt64(warp_m));
  llvm::Value* col0 = b.CreateMul(b.CreateURem(warp, b.getInt64(warps.cols)), b.getInt64(warp_n));
  std::vector<int64_t> a_origins, b_origins;
  for (int w = 0; w < warps.rows * warps.cols; ++w) {
    a_origins.push_back(w / warps.cols * warp_m);
    b_origins.push_back(w % warps.cols * warp_n);
  }
  auto lane_address = [&](const SharedMatrix& op, const Load& load, llvm::Value* origin) {
    llvm::Value* offset = ldmatrix_lane_offset(b, stored(op, f.bytes), load.lanes, load.mn, load.k, origin, lane);
    return b.CreateAdd(shared32(b, op.data), b.CreateTrunc(offset, b.getInt32Ty()));
  };
  // Each operand's loads over the whole product, their bases made once.
  struct Planned {
    llvm::Value* base;
    int64_t imm;
  };
  using Plan = std::map<std::tuple<LdmatrixLanes, int64_t, int64_t>, Planned>;
  auto plan = [&](const SharedMatrix& op, const std::vector<Load>& loads, const std::vector<int64_t>& origins,
                  llvm::Value* origin) {
    Plan planned;
    for (const LoadGroup& g : group_loads(stored(op, f.bytes), loads, origins)) {
      llvm::Value* base = lane_address(op, g.first, origin);
      for (const auto& [load, imm] : g.loads) planned[{load.lanes, load.mn, load.k}] = {base, imm};
    }
    return planned;
  };
  // tf32 and i8 stored along m or n, which ldmatrix cannot transpose: each
  // register's elements loaded one by one, at byte 4 (lane % 4) + 16 * half
  // of k (a's register j: half j / 2, row lane / 4 + 8 (j % 2); b's: half
  // j, column lane / 4), packed low to high.
  const bool a_by_element = !a.registers && !a.k_major && !f.transposable;
  const bool b_by_element = !bm.k_major && !f.transposable;
  llvm::Value* group = b.CreateLShr(lane, 2);
  llvm::Value* k_lane = b.CreateMul(b.CreateAnd(lane, 3), b.getInt64(4 / f.bytes));
  llvm::Type* elem = b.getIntNTy(static_cast<unsigned>(8 * f.bytes));
  auto by_element = [&](const SharedMatrix& op, llvm::Value* mn, int64_t k0) {
    llvm::Value* reg = b.getInt32(0);
    for (int64_t e = 0; e < 4 / f.bytes; ++e) {
      llvm::Value* k = b.CreateAdd(k_lane, b.getInt64(k0 + e));
      llvm::Value* at = b.CreateInBoundsGEP(b.getInt8Ty(), op.data,
                                            tile_offset(b, k, mn, op.rows, op.cols, f.bytes, op.swizzle));
      llvm::Value* v = b.CreateZExt(b.CreateLoad(elem, at), b.getInt32Ty());
      reg = b.CreateOr(reg, b.CreateShl(v, static_cast<uint64_t>(8 * f.bytes * e)));
    }
    return reg;
  };
  const int64_t half_k = 16 / f.bytes;  // elements in 16 bytes of k
  auto a_elements = [&](int64_t i, int64_t k0) {
    std::vector<llvm::Value*> regs;
    for (int64_t j = 0; j < 4; ++j) {
      llvm::Value* row = b.CreateAdd(b.CreateAdd(row0, group), b.getInt64(i * kMmaRows + 8 * (j % 2)));
      regs.push_back(by_element(a, row, k0 + half_k * (j / 2)));
    }
    return regs;
  };
  auto b_elements = [&](int64_t j, int64_t k0) {
    llvm::Value* col = b.CreateAdd(b.CreateAdd(col0, group), b.getInt64(j * kMmaCols));
    return std::vector<llvm::Value*>{by_element(bm, col, k0), by_element(bm, col, k0 + half_k)};
  };
  std::vector<Load> a_loads, b_loads;
  for (int64_t kk = 0; kk < s.k / step; ++kk) {
    for (int64_t i = 0; !a.registers && !a_by_element && i < blocks_m; ++i) {
      a_loads.push_back({LdmatrixLanes::kA, i * kMmaRows, kk * step});
    }
    for (int64_t j = 0; !b_by_element && j < blocks_n; j += 2) {
      b_loads.push_back({j + 1 < blocks_n ? LdmatrixLanes::kB : LdmatrixLanes::kLastB, j * kMmaCols, kk * step});
    }
  }
  const Plan a_planned = a.registers ? Plan{} : plan(a, a_loads, a_origins, row0);
  const Plan b_planned = plan(bm, b_loads, b_origins, col0);
  auto ldmatrix = [&](const SharedMatrix& op, const Planned& at, bool four) {
    const int count = four ? 4 : 2;
    const std::string text = absl::StrCat("ldmatrix.sync.aligned.m8n8.x", count, op.k_major ? "" : ".trans",
                                          ".shared.b16 ", register_list(0, count), ", [$", count, "+", at.imm, "];");
    std::vector<llvm::Type*> types(count, b.getInt32Ty());
    llvm::Value* loaded = inline_asm(b, llvm::StructType::get(b.getContext(), types), text,
                                     four ? "=r,=r,=r,=r,r" : "=r,=r,r", {at.base});
    std::vector<llvm::Value*> regs;
    for (int i = 0; i < count; ++i) regs.push_back(b.CreateExtractValue(loaded, i));
    return regs;
  };
  // a in registers: slots of the accumulator layout of m x k, whose 16 x 8
  // blocks 2kk and 2kk + 1 are the A fragment of k step kk.
  auto register_a = [&](int64_t i, int64_t kk) {
    const int64_t blocks_k = s.k / kMmaCols;
    std::vector<llvm::Value*> regs;
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t first = ((i * blocks_k) + 2 * kk + half) * kMmaSlots;
      regs.push_back(pack_b16(b, a.regs[first], a.regs[first + 1]));
      regs.push_back(pack_b16(b, a.regs[first + 2], a.regs[first + 3]));
    }
    return regs;
  };
  // f16 operands go to the instruction as <2 x half>.
  auto as_operand = [&](llvm::Value* v) {
    return s.a == f16 ? b.CreateBitCast(v, llvm::FixedVectorType::get(b.getHalfTy(), 2)) : v;
  };
  // fp8: d from a, b and c, inline assembly that is a pure function of its operands.
  auto fp8_mma = [&](const std::vector<llvm::Value*>& args) {
    const std::string text =
        absl::StrCat("mma.sync.aligned.m16n8k32.row.col.f32", f.fp8_types, ".f32 ", register_list(0, 4), ", ",
                     register_list(4, 4), ", ", register_list(8, 2), ", ", register_list(10, 4), ";");
    std::vector<llvm::Type*> types(kMmaSlots, b.getFloatTy());
    return pure_asm(b, llvm::StructType::get(b.getContext(), types), text, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", args);
  };
  for (int64_t kk = 0; kk < s.k / step; ++kk) {
    const int64_t k0 = kk * step;
    std::vector<std::vector<llvm::Value*>> a_frags, b_frags;
    for (int64_t i = 0; i < blocks_m; ++i) {
      a_frags.push_back(a.registers     ? register_a(i, kk)
                        : a_by_element ? a_elements(i, k0)
                                       : ldmatrix(a, a_planned.at({LdmatrixLanes::kA, i * kMmaRows, k0}), true));
    }
    for (int64_t j = 0; b_by_element && j < blocks_n; ++j) b_frags.push_back(b_elements(j, k0));
    for (int64_t j = 0; !b_by_element && j < blocks_n; j += 2) {
      const bool pair = j + 1 < blocks_n;
      std::vector<llvm::Value*> regs =
          ldmatrix(bm, b_planned.at({pair ? LdmatrixLanes::kB : LdmatrixLanes::kLastB, j * kMmaCols, k0}), pair);
      b_frags.push_back({regs[0], regs[1]});
      if (pair) b_frags.push_back({regs[2], regs[3]});
    }
    for (int64_t i = 0; i < blocks_m; ++i) {
      for (int64_t j = 0; j < blocks_n; ++j) {
        const int64_t first = (i * blocks_n + j) * kMmaSlots;
        std::vector<llvm::Value*> args;
        for (llvm::Value* v : a_frags[i]) args.push_back(as_operand(v));
        for (llvm::Value* v : b_frags[j]) args.push_back(as_operand(v));
        for (int64_t v = 0; v < kMmaSlots; ++v) args.push_back(acc[first + v]);
        llvm::Value* d = f.fp8_types.empty() ? b.CreateIntrinsic(f.id, {}, args) : fp8_mma(args);
        for (unsigned v = 0; v < kMmaSlots; ++v) acc[first + v] = b.CreateExtractValue(d, v);
      }
    }
  }
  return acc;
}

}  // namespace tessel::codegen::nvptx
