#include "codegen/nvptx/wgmma.h"

#include <functional>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/nvptx/ptx_asm.h"

namespace tessel::codegen::nvptx {
namespace {

constexpr int kWarpgroup = kWarpgroupThreads;
// The most accumulator registers a thread keeps: one m64n256 block, or two
// m64n160 (a 256 x 160 tile on two warpgroups), which leaves 95 of a
// 255-register budget for everything else.
constexpr int64_t kMaxSlots = 160;

class WgmmaLayout final : public Layout {
 public:
  WgmmaLayout(int64_t m, int64_t n, int warpgroups, int col_groups)
      : m_(m), n_(n), warpgroups_(warpgroups), col_groups_(col_groups) {}

  int64_t numel() const override { return m_ * n_; }
  int threads() const override { return warpgroups_ * kWarpgroup; }
  int64_t slots() const override { return m_ / 64 / row_groups() * (width() / 2); }
  // The thread's part, the same for every slot (so that LLVM computes it
  // once), plus the slot's constant: each slot's address is then one base
  // and an immediate offset.
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    const int64_t j = slot / (width() / 2), i = slot % (width() / 2);
    llvm::Value* group = b.CreateLShr(thread, 7);
    llvm::Value* warp = b.CreateAnd(b.CreateLShr(thread, 5), 3);
    llvm::Value* lane = b.CreateAnd(thread, 31);
    // row = 64 * (group / col_groups) + 16 * warp + lane / 4, + 64 * j * row_groups + 8 * (i / 2 % 2)
    llvm::Value* row_group = col_groups_ == 1 ? group : b.CreateUDiv(group, b.getInt64(col_groups_));
    llvm::Value* row = b.CreateAdd(b.CreateMul(row_group, b.getInt64(64)), b.CreateMul(warp, b.getInt64(16)));
    row = b.CreateAdd(row, b.CreateLShr(lane, 2));
    // col = width * (group % col_groups) + 2 * (lane % 4), + 8 * (i / 4) + i % 2
    llvm::Value* col = b.CreateMul(b.CreateAnd(lane, 3), b.getInt64(2));
    if (col_groups_ > 1) {
      col = b.CreateAdd(col, b.CreateMul(b.CreateURem(group, b.getInt64(col_groups_)), b.getInt64(width())));
    }
    llvm::Value* own = b.CreateAdd(b.CreateMul(row, b.getInt64(n_)), col);
    return b.CreateAdd(own, b.getInt64((64 * j * row_groups() + 8 * (i / 2 % 2)) * n_ + 8 * (i / 4) + i % 2));
  }
  llvm::Value* valid(llvm::IRBuilder<>&, llvm::Value*, int64_t) const override { return nullptr; }
  // Slots of each row block a thread holds: two a column pair of 8.
  int64_t block_slots() const { return width() / 2; }
  int64_t element_at(int64_t thread, int64_t slot) const override {
    return wgmma_accumulator_element(n_, warpgroups_, thread, slot, col_groups_);
  }
  bool same_as(const Layout& other) const override {
    auto* o = dynamic_cast<const WgmmaLayout*>(&other);
    return o != nullptr && o->m_ == m_ && o->n_ == n_ && o->warpgroups_ == warpgroups_ && o->col_groups_ == col_groups_;
  }
  // Whole blocks of 8 columns of a fragment whose warpgroups hold all
  // columns: the same threads hold them as a fragment of that width.
  std::shared_ptr<const Layout> narrowed(const std::vector<int64_t>& shape, int axis, int64_t start,
                                         int64_t size) const override {
    if (shape != std::vector<int64_t>{m_, n_} || axis != 1 || col_groups_ != 1 || start % 8 != 0 || size % 8 != 0) {
      return nullptr;
    }
    return std::make_shared<WgmmaLayout>(m_, size, warpgroups_, 1);
  }

 private:
  int64_t width() const { return n_ / col_groups_; }
  int row_groups() const { return warpgroups_ / col_groups_; }
  int64_t m_, n_;
  int warpgroups_, col_groups_;
};

// `text` (which names no operand of the accumulators) with every value of
// `acc` (f32 accumulators, or b32 registers) passed through it: outputs
// tied to the inputs, so that LLVM keeps each use of them on its side of
// the instruction.
std::vector<llvm::Value*> tied(llvm::IRBuilder<>& b, const std::string& text, const std::vector<llvm::Value*>& acc,
                               std::vector<llvm::Value*> leading = {}, const std::string& leading_constraints = "") {
  const int n = static_cast<int>(acc.size());
  std::vector<std::string> outs, ins;
  std::vector<llvm::Type*> types;
  for (llvm::Value* v : acc) {
    outs.push_back(v->getType()->isFloatTy() ? "=f" : "=r");
    types.push_back(v->getType());
  }
  if (!leading_constraints.empty()) ins.push_back(leading_constraints);
  for (int i = 0; i < n; ++i) ins.push_back(absl::StrCat(i));
  std::string constraints = absl::StrCat(absl::StrJoin(outs, ","), ",", absl::StrJoin(ins, ","), ",~{memory}");
  std::vector<llvm::Value*> args = std::move(leading);
  args.insert(args.end(), acc.begin(), acc.end());
  auto* ret = llvm::StructType::get(b.getContext(), types);
  llvm::Value* r = inline_asm(b, ret, text, constraints, args);
  std::vector<llvm::Value*> out;
  for (int i = 0; i < n; ++i) out.push_back(b.CreateExtractValue(r, i));
  return out;
}

}  // namespace

std::shared_ptr<const Layout> wgmma_accumulator_layout(int64_t m, int64_t n, int warpgroups, int col_groups) {
  return std::make_shared<WgmmaLayout>(m, n, warpgroups, col_groups);
}

namespace {

// What wgmma multiplies: 16-bit floats (either operand K- or MN-major, a
// from shared memory or registers), fp8 (e4m3 and e5m2 in any pairing),
// tf32 or i8 into i32, those three K-major from shared memory. Each step
// takes 32 bytes of k.
struct Form {
  std::string types;  // the instruction's ".d.a.b" suffix
  int bytes = 0;      // per element
  bool transposable = false;
  bool integer = false;  // no negating immediates; fewer widths

  // Whether wgmma has an m64nNk form of width n: any multiple of 8 up to
  // 256; for integers 8, 16, 24, then multiples of 16.
  bool has_width(int64_t n) const { return n >= 8 && n <= 256 && n % 8 == 0 && (!integer || n <= 24 || n % 16 == 0); }
};

std::optional<Form> form_of(const MmaShape& s) {
  if (s.acc == i32 && s.a == i8 && s.b == i8) return Form{".s32.s8.s8", 1, false, true};
  if (s.acc != f32) return std::nullopt;
  if ((s.a == bf16 || s.a == f16) && s.b == s.a && !s.tf32) {
    const std::string t = s.a == bf16 ? "bf16" : "f16";
    return Form{absl::StrCat(".f32.", t, ".", t), 2, true};
  }
  auto fp8 = [](DType d) { return d == f8e4m3 ? "e4m3" : "e5m2"; };
  if (s.a.is_float8() && s.b.is_float8()) return Form{absl::StrCat(".f32.", fp8(s.a), ".", fp8(s.b)), 1, false};
  if (s.a == f32 && s.b == f32 && s.tf32) return Form{".f32.tf32.tf32", 4, false};
  return std::nullopt;
}

int64_t k_step(const Form& f) { return 32 / f.bytes; }

// How `threads` threads share an m x n product: warpgroups in col_groups
// groups of columns (wgmma_accumulator_element), each issuing m64 x
// width() instructions on its row blocks; none (0 warpgroups) where m and n
// do not suit them.
struct Split {
  int warpgroups = 0, col_groups = 1;
  int row_groups() const { return warpgroups / col_groups; }
  int64_t width(const MmaShape& s) const { return s.n / col_groups; }
  int64_t blocks(const MmaShape& s) const { return s.m / 64 / row_groups(); }
};

Split split_for(const MmaShape& s, const Form& f, int threads) {
  if (threads % kWarpgroup != 0 || s.m % 64 != 0 || s.k % k_step(f) != 0) return {};
  const int warpgroups = threads / kWarpgroup;
  // The fewest column groups that leave every warpgroup whole row blocks.
  for (int cols = 1; cols <= warpgroups; ++cols) {
    const Split split{warpgroups, cols};
    const int64_t w = split.width(s);
    if (warpgroups % cols != 0 || s.m / 64 % split.row_groups() != 0) continue;
    if (s.n % cols != 0 || !f.has_width(w)) return {};
    if (split.blocks(s) * (w / 2) > kMaxSlots) return {};
    return split;
  }
  return {};
}

// Whether the warpgroups of `split` can multiply with an operand like `op`
// along `mn` (a stored tile, or a in registers); `column_groups` for b,
// whose columns they split.
bool operands_fit(const MmaShape& s, const Form& f, const SharedMatrix& op, int64_t mn, const Split& split,
                  bool column_groups) {
  if (op.registers) return f.transposable && split.col_groups == 1;
  const int64_t width = swizzle_bytes(op.swizzle), row = op.cols * f.bytes;
  if (width == 0 || row % width != 0) return false;
  if (op.k_major) return op.rows == mn && op.cols == s.k;
  // MN-major: panels no wider than an m64 block, so that each block starts
  // on one, and each column group's share of b whole panels.
  const int64_t elems = width / f.bytes;
  if (column_groups && split.width(s) % elems != 0 && split.col_groups > 1) return false;
  return f.transposable && op.rows == s.k && op.cols == mn && 64 % elems == 0;
}

}  // namespace

std::shared_ptr<const Layout> wgmma_layout(const MmaShape& s, const SharedMatrix& a, const SharedMatrix& b,
                                           int threads) {
  const std::optional<Form> f = form_of(s);
  if (!f) return nullptr;
  const Split split = split_for(s, *f, threads);
  if (split.warpgroups == 0 || !operands_fit(s, *f, a, s.m, split, false) ||
      !operands_fit(s, *f, b, s.n, split, true)) {
    return nullptr;
  }
  return wgmma_accumulator_layout(s.m, s.n, split.warpgroups, split.col_groups);
}

std::shared_ptr<const Layout> wgmma_register_a_layout(const MmaShape& s, const SharedMatrix& b, int threads) {
  const std::optional<Form> f = form_of(s);
  if (!f || !f->transposable) return nullptr;
  const Split split = split_for(s, *f, threads);
  // Each warpgroup holds its own rows of a: not where warpgroups share rows.
  if (split.warpgroups == 0 || split.col_groups != 1 || !operands_fit(s, *f, b, s.n, split, true) ||
      split.blocks(s) * (s.k / 2) > kMaxSlots) {
    return nullptr;
  }
  // The fragment of a k16 step is the accumulator's of an m64n16 block: a
  // [m, k] tile in the accumulator's layout holds every step's in order.
  return wgmma_accumulator_layout(s.m, s.k, split.warpgroups);
}

namespace {

// Where the k step `kk` of an operand's 64-row block `block` (0 for b)
// starts, in bytes from the tile: block * block_bytes + offset(kk).
struct OperandSteps {
  int64_t block_bytes;
  std::function<int64_t(int64_t)> offset;
  uint64_t panel_bytes;  // the descriptor's leading byte offset
};

OperandSteps operand_steps(const SharedMatrix& op, const Form& f) {
  const int64_t width = swizzle_bytes(op.swizzle), elems = width / f.bytes, step = k_step(f);
  const int64_t panel = op.rows * width;  // one panel of the tile as stored
  if (op.k_major) {
    // Rows along m or n, k steps of 32 bytes along a row, panel after panel.
    return {64 * width, [=](int64_t kk) { return step * kk / elems * panel + step * kk % elems * f.bytes; }, 16};
  }
  // Rows along k, 16 rows per step; m or n across panels.
  return {64 / elems * panel, [=](int64_t kk) { return step * kk * width; }, static_cast<uint64_t>(panel)};
}

// The f32 value a 16-bit float was rounded from (a cast's fptrunc, seen
// through the bitcast to its bits), or nullptr.
llvm::Value* rounded_from_f32(llvm::Value* v, llvm::Type** to) {
  if (auto* bits = llvm::dyn_cast<llvm::BitCastInst>(v)) v = bits->getOperand(0);
  auto* round = llvm::dyn_cast<llvm::FPTruncInst>(v);
  if (round == nullptr || !round->getSrcTy()->isFloatTy()) return nullptr;
  *to = round->getDestTy();
  return round->getOperand(0);
}

}  // namespace

llvm::Value* pack_b16(llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi) {
  llvm::Type *lo_to = nullptr, *hi_to = nullptr;
  llvm::Value* lo_f32 = rounded_from_f32(lo, &lo_to);
  llvm::Value* hi_f32 = rounded_from_f32(hi, &hi_to);
  if (lo_f32 != nullptr && hi_f32 != nullptr && lo_to == hi_to && (lo_to->isBFloatTy() || lo_to->isHalfTy())) {
    // (LLVM 19's NVPTX splits a <2 x float> fptrunc into two.) The first
    // source goes to the upper half.
    const char* text = lo_to->isBFloatTy() ? "cvt.rn.bf16x2.f32 $0, $1, $2;" : "cvt.rn.f16x2.f32 $0, $1, $2;";
    return pure_asm(b, b.getInt32Ty(), text, "=r,f,f", {hi_f32, lo_f32});
  }
  llvm::Value* pair = llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getInt16Ty(), 2));
  pair = b.CreateInsertElement(b.CreateInsertElement(pair, lo, uint64_t{0}), hi, uint64_t{1});
  return b.CreateBitCast(pair, b.getInt32Ty());
}

std::vector<llvm::Value*> emit_wgmma(llvm::IRBuilder<>& b, const MmaShape& s, const SharedMatrix& a,
                                     const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* warpgroup,
                                     int threads, int in_flight) {
  const Form f = *form_of(s);
  const Split split = split_for(s, f, threads);
  const int64_t blocks = split.blocks(s), width = split.width(s), half = width / 2, step = k_step(f);
  const OperandSteps b_steps = operand_steps(bm, f);
  std::optional<OperandSteps> a_steps;  // a in shared memory
  if (!a.registers) a_steps = operand_steps(a, f);
  // A descriptor's low word is the start address / 16 (14 bits) and the
  // leading byte offset. Shared-memory addresses are below 2^18, so a
  // step along a tile, whole 16-byte units, adds to the start without
  // carrying into the offset: each operand's low word is made once, and
  // each k step and row block adds its offset to it.
  auto low_word = [&](const SharedMatrix& op, const OperandSteps& steps, llvm::Value* addr) {
    const auto fields = static_cast<uint32_t>(wgmma_descriptor(0, op.swizzle, steps.panel_bytes));
    return b.CreateOr(b.CreateAnd(b.CreateLShr(addr, 4), 0x3FFF), b.getInt32(fields));
  };
  auto descriptor = [&](const SharedMatrix& op, const OperandSteps& steps, llvm::Value* low, int64_t offset) {
    const uint64_t high = wgmma_descriptor(0, op.swizzle, steps.panel_bytes) & ~uint64_t{0xFFFFFFFF};
    llvm::Value* word = b.CreateAdd(low, b.getInt32(offset / 16));
    return b.CreateOr(b.CreateZExt(word, b.getInt64Ty()), b.getInt64(high));
  };
  llvm::Value* a_base = a.registers ? nullptr : shared32(b, a.data);
  llvm::Value* b_base = shared32(b, bm.data);
  // With column groups, a warpgroup's row blocks are those of its group's
  // index among the row groups, and its b starts at its columns: rows of
  // a K-major b, whole panels of an MN-major one.
  llvm::Value* row_group = warpgroup;
  if (split.col_groups > 1) {
    row_group = b.CreateUDiv(warpgroup, b.getInt32(split.col_groups));
    llvm::Value* col_group = b.CreateURem(warpgroup, b.getInt32(split.col_groups));
    const int64_t elems = swizzle_bytes(bm.swizzle) / f.bytes;
    const int64_t col_bytes =
        bm.k_major ? width * swizzle_bytes(bm.swizzle) : width / elems * bm.rows * swizzle_bytes(bm.swizzle);
    b_base = b.CreateAdd(b_base, b.CreateMul(col_group, b.getInt32(col_bytes)));
  }
  // Operands after the accumulators: a (a descriptor, or four registers),
  // b's descriptor, then the predicate that adds the accumulator.
  const int a_count = a.registers ? 4 : 1;
  const int b_at = static_cast<int>(half) + a_count, p_at = b_at + 1;
  const std::string a_operand = a.registers ? register_list(static_cast<int>(half), 4) : absl::StrCat("$", half);
  std::string transposes;
  if (f.transposable) transposes = a.registers ? absl::StrCat(", ", bm.k_major ? 0 : 1)
                                               : absl::StrCat(", ", a.k_major ? 0 : 1, ", ", bm.k_major ? 0 : 1);
  const std::string mma =
      absl::StrCat("{\n.reg .pred p;\nsetp.ne.b32 p, $", p_at, ", 0;\n", "wgmma.mma_async.sync.aligned.m64n", width,
                   "k", step, f.types, " ", register_list(0, static_cast<int>(half)), ", ", a_operand, ", $", b_at,
                   ", p", f.integer ? "" : ", 1, 1", transposes, ";\n}");
  const std::string constraints = a.registers ? "r,r,r,r,l,r" : "l,l,r";
  // a in registers: the slots paired into b32 registers, all before the
  // fence (which orders register writes before the wgmma that read them),
  // passed through it with the accumulators.
  std::vector<llvm::Value*> a_regs;
  for (size_t q = 0; a.registers && q + 1 < a.regs.size(); q += 2) {
    a_regs.push_back(pack_b16(b, a.regs[q], a.regs[q + 1]));
  }
  acc.insert(acc.end(), a_regs.begin(), a_regs.end());
  acc = tied(b, "wgmma.fence.sync.aligned;", acc);
  a_regs.assign(acc.begin() + (acc.size() - a_regs.size()), acc.end());
  acc.resize(acc.size() - a_regs.size());
  llvm::Value* b_low = low_word(bm, b_steps, b_base);
  llvm::Value* a_low =
      a.registers
          ? nullptr
          : low_word(a, *a_steps, b.CreateAdd(a_base, b.CreateMul(row_group, b.getInt32(a_steps->block_bytes))));
  for (int64_t kk = 0; kk < s.k / step; ++kk) {
    llvm::Value* b_desc = descriptor(bm, b_steps, b_low, b_steps.offset(kk));
    for (int64_t j = 0; j < blocks; ++j) {
      std::vector<llvm::Value*> operands;
      if (a.registers) {
        // Slots 8 kk .. 8 kk + 7 of block j's k / 2: four b32 registers.
        const int64_t first = (j * (s.k / 2) + 8 * kk) / 2;
        operands.insert(operands.end(), a_regs.begin() + first, a_regs.begin() + first + 4);
      } else {
        const int64_t offset = j * split.row_groups() * a_steps->block_bytes + a_steps->offset(kk);
        operands.push_back(descriptor(a, *a_steps, a_low, offset));
      }
      operands.push_back(b_desc);
      operands.push_back(b.getInt32(1));
      std::vector<llvm::Value*> part(acc.begin() + j * half, acc.begin() + (j + 1) * half);
      part = tied(b, mma, part, std::move(operands), constraints);
      std::copy(part.begin(), part.end(), acc.begin() + j * half);
    }
  }
  inline_asm(b, b.getVoidTy(), "wgmma.commit_group.sync.aligned;", "~{memory}", {});
  return wgmma_wait(b, std::move(acc), in_flight);
}

bool emit_stmatrix(llvm::IRBuilder<>& b, const Layout& layout, const std::vector<llvm::Value*>& slots, int64_t cols,
                   llvm::Value* tid, const std::function<llvm::Value*(llvm::Value*)>& address,
                   const SlotFilter& keep) {
  const auto* wgmma = dynamic_cast<const WgmmaLayout*>(&layout);
  // (Rows of 16-byte multiples: every matrix row's address is aligned.)
  if (wgmma == nullptr || cols % 8 != 0 || slots.empty() || slots[0]->getType() != b.getInt16Ty()) return false;
  // Each row block's slots go 8 at a time (a 16 x 16 block, x4), the last
  // 4 alone (16 x 8, x2) where its width is 8 past a multiple of 16.
  const auto per_block = static_cast<size_t>(wgmma->block_slots());
  struct Group {
    size_t first, size;
  };
  std::vector<Group> groups;
  for (size_t block = 0; block < slots.size(); block += per_block) {
    for (size_t i = 0; i < per_block; i += 8) groups.push_back({block + i, std::min<size_t>(8, per_block - i)});
  }
  auto kept = [&](size_t slot) { return !keep || keep(static_cast<int64_t>(slot)); };
  for (const Group& g : groups) {
    for (size_t s = g.first + 1; s < g.first + g.size; ++s) {
      if (kept(s) != kept(g.first)) return false;
    }
  }
  // Slots 8g .. 8g+7 of a row block hold, in pairs, the four 8 x 8 matrices
  // of a 16 x 16 block: (rows +0, cols +0), (+8, +0), (+0, +8), (+8, +8).
  // Lane l gives row l % 8 of matrix l / 8: the row lane 4 (l % 8) holds,
  // moved by that matrix's offset (x2 reads lanes 0-15 only).
  llvm::Value* lane = b.CreateAnd(tid, 31);
  llvm::Value* row_lane = b.CreateOr(b.CreateSub(tid, lane), b.CreateMul(b.CreateAnd(lane, 7), b.getInt64(4)));
  llvm::Value* matrix = b.CreateLShr(lane, 3);
  llvm::Value* offset = b.CreateAdd(b.CreateMul(b.CreateAnd(matrix, 1), b.getInt64(8 * cols)),
                                    b.CreateMul(b.CreateLShr(matrix, 1), b.getInt64(8)));
  for (const Group& g : groups) {
    if (!kept(g.first)) continue;
    llvm::Value* at = address(b.CreateAdd(layout.element(b, row_lane, static_cast<int64_t>(g.first)), offset));
    std::vector<llvm::Value*> args = {shared32(b, at)};
    for (size_t q = 0; q < g.size / 2; ++q)
      args.push_back(pack_b16(b, slots[g.first + 2 * q], slots[g.first + 2 * q + 1]));
    const bool x4 = g.size == 8;
    inline_asm(b, b.getVoidTy(),
               x4 ? "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {$1, $2, $3, $4};"
                  : "stmatrix.sync.aligned.m8n8.x2.shared.b16 [$0], {$1, $2};",
               x4 ? "r,r,r,r,r,~{memory}" : "r,r,r,~{memory}", args);
  }
  return true;
}

std::vector<llvm::Value*> wgmma_wait(llvm::IRBuilder<>& b, std::vector<llvm::Value*> acc, int in_flight) {
  return tied(b, absl::StrCat("wgmma.wait_group.sync.aligned ", in_flight, ";"), acc);
}

}  // namespace tessel::codegen::nvptx
