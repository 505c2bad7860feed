#include "codegen/nvptx/wgmma.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/nvptx/ptx_asm.h"

namespace tessel::codegen::nvptx {
namespace {

constexpr int kWarpgroup = kWarpgroupThreads;
// The most accumulator registers a thread keeps: two m64n256 blocks, or one
// with 128 left for everything else of a 255-register budget.
constexpr int64_t kMaxSlots = 128;

class WgmmaLayout final : public Layout {
 public:
  WgmmaLayout(int64_t m, int64_t n, int warpgroups) : m_(m), n_(n), warpgroups_(warpgroups) {}

  int64_t numel() const override { return m_ * n_; }
  int threads() const override { return warpgroups_ * kWarpgroup; }
  int64_t slots() const override { return m_ / 64 / warpgroups_ * (n_ / 2); }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    const int64_t j = slot / (n_ / 2), i = slot % (n_ / 2);
    llvm::Value* group = b.CreateLShr(thread, 7);
    llvm::Value* warp = b.CreateAnd(b.CreateLShr(thread, 5), 3);
    llvm::Value* lane = b.CreateAnd(thread, 31);
    // row = 64 * (j * warpgroups + group) + 16 * warp + lane / 4 + 8 * (i / 2 % 2)
    llvm::Value* row = b.CreateAdd(b.CreateMul(group, b.getInt64(64)), b.CreateMul(warp, b.getInt64(16)));
    row = b.CreateAdd(row, b.CreateLShr(lane, 2));
    row = b.CreateAdd(row, b.getInt64(64 * j * warpgroups_ + 8 * (i / 2 % 2)));
    // col = 8 * (i / 4) + 2 * (lane % 4) + i % 2
    llvm::Value* col = b.CreateAdd(b.CreateMul(b.CreateAnd(lane, 3), b.getInt64(2)), b.getInt64(8 * (i / 4) + i % 2));
    return b.CreateAdd(b.CreateMul(row, b.getInt64(n_)), col);
  }
  llvm::Value* valid(llvm::IRBuilder<>&, llvm::Value*, int64_t) const override { return nullptr; }
  int64_t element_at(int64_t thread, int64_t slot) const override {
    return wgmma_accumulator_element(n_, warpgroups_, thread, slot);
  }
  bool same_as(const Layout& other) const override {
    auto* o = dynamic_cast<const WgmmaLayout*>(&other);
    return o != nullptr && o->m_ == m_ && o->n_ == n_ && o->warpgroups_ == warpgroups_;
  }

 private:
  int64_t m_, n_;
  int warpgroups_;
};

// "{$first, ..., $first+count-1}"
std::string register_list(int first, int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(absl::StrCat("$", first + i));
  return absl::StrCat("{", absl::StrJoin(names, ", "), "}");
}

// `text` (which names no operand of the accumulators) with every value of
// `acc` passed through it: outputs "=f" tied to the inputs, so that LLVM
// keeps each use of an accumulator on its side of the instruction.
std::vector<llvm::Value*> tied(llvm::IRBuilder<>& b, const std::string& text, const std::vector<llvm::Value*>& acc,
                               std::vector<llvm::Value*> leading = {}, const std::string& leading_constraints = "") {
  const int n = static_cast<int>(acc.size());
  std::vector<std::string> outs(n, "=f"), ins;
  if (!leading_constraints.empty()) ins.push_back(leading_constraints);
  for (int i = 0; i < n; ++i) ins.push_back(absl::StrCat(i));
  std::string constraints = absl::StrCat(absl::StrJoin(outs, ","), ",", absl::StrJoin(ins, ","), ",~{memory}");
  std::vector<llvm::Value*> args = std::move(leading);
  args.insert(args.end(), acc.begin(), acc.end());
  auto* ret = llvm::StructType::get(b.getContext(), std::vector<llvm::Type*>(n, b.getFloatTy()));
  llvm::Value* r = inline_asm(b, ret, text, constraints, args);
  std::vector<llvm::Value*> out;
  for (int i = 0; i < n; ++i) out.push_back(b.CreateExtractValue(r, i));
  return out;
}

}  // namespace

std::shared_ptr<const Layout> wgmma_accumulator_layout(int64_t m, int64_t n, int warpgroups) {
  return std::make_shared<WgmmaLayout>(m, n, warpgroups);
}

std::shared_ptr<const Layout> wgmma_layout(const MmaShape& s, const SharedMatrix& a, const SharedMatrix& b,
                                           int threads) {
  if ((s.in != bf16 && s.in != f16) || s.acc != f32) return nullptr;
  if (threads % kWarpgroup != 0) return nullptr;
  const int warpgroups = threads / kWarpgroup;
  if (s.m % 64 != 0 || s.m / 64 % warpgroups != 0) return nullptr;
  if (s.n % 8 != 0 || s.n < 8 || s.n > 256 || s.k % 16 != 0) return nullptr;
  // Operands K-major, each row one swizzle width along k.
  for (const SharedMatrix* op : {&a, &b}) {
    if (!op->k_major || op->swizzle == Swizzle::kNone) return nullptr;
    if (op->cols != s.k || op->cols * s.in.bytes() != swizzle_bytes(op->swizzle)) return nullptr;
  }
  if (a.rows != s.m || b.rows != s.n) return nullptr;
  if (s.m / 64 / warpgroups * (s.n / 2) > kMaxSlots) return nullptr;
  return wgmma_accumulator_layout(s.m, s.n, warpgroups);
}

std::vector<llvm::Value*> emit_wgmma(llvm::IRBuilder<>& b, const MmaShape& s, const SharedMatrix& a,
                                     const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* tid,
                                     int threads, int in_flight) {
  const int warpgroups = threads / kWarpgroup;
  const int64_t blocks = s.m / 64 / warpgroups, half = s.n / 2;
  const char* type = s.in == bf16 ? "bf16" : "f16";
  auto descriptor = [&](const SharedMatrix& op, llvm::Value* addr) {
    llvm::Value* start = b.CreateLShr(b.CreateAnd(b.CreateZExt(addr, b.getInt64Ty()), 0x3FFFF), 4);
    return b.CreateOr(start, b.getInt64(wgmma_descriptor(0, op.swizzle)));
  };
  llvm::Value* group = b.CreateTrunc(b.CreateLShr(tid, 7), b.getInt32Ty());
  llvm::Value* a_base = shared32(b, a.data);
  llvm::Value* b_base = shared32(b, bm.data);
  const int64_t a_row = swizzle_bytes(a.swizzle), k_step = 16 * s.in.bytes();
  const std::string mma = absl::StrCat("{\n.reg .pred p;\nsetp.ne.b32 p, $", half + 2, ", 0;\n",
                                       "wgmma.mma_async.sync.aligned.m64n", s.n, "k16.f32.", type, ".", type, " ",
                                       register_list(0, static_cast<int>(half)), ", $", half, ", $", half + 1,
                                       ", p, 1, 1, 0, 0;\n}");
  acc = tied(b, "wgmma.fence.sync.aligned;", acc);
  for (int64_t kk = 0; kk < s.k / 16; ++kk) {
    llvm::Value* b_desc = descriptor(bm, b.CreateAdd(b_base, b.getInt32(kk * k_step)));
    for (int64_t j = 0; j < blocks; ++j) {
      llvm::Value* block = b.CreateAdd(group, b.getInt32(j * warpgroups));
      llvm::Value* a_addr = b.CreateAdd(b.CreateAdd(a_base, b.CreateMul(block, b.getInt32(64 * a_row))),
                                        b.getInt32(kk * k_step));
      std::vector<llvm::Value*> part(acc.begin() + j * half, acc.begin() + (j + 1) * half);
      part = tied(b, mma, part, {descriptor(a, a_addr), b_desc, b.getInt32(1)}, "l,l,r");
      std::copy(part.begin(), part.end(), acc.begin() + j * half);
    }
  }
  inline_asm(b, b.getVoidTy(), "wgmma.commit_group.sync.aligned;", "~{memory}", {});
  return wgmma_wait(b, std::move(acc), in_flight);
}

std::vector<llvm::Value*> wgmma_wait(llvm::IRBuilder<>& b, std::vector<llvm::Value*> acc, int in_flight) {
  return tied(b, absl::StrCat("wgmma.wait_group.sync.aligned ", in_flight, ";"), acc);
}

}  // namespace tessel::codegen::nvptx
