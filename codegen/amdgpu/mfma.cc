#include "codegen/amdgpu/mfma.h"

#include "codegen/amdgpu/mfma_fragment.h"
#include "llvm/IR/IntrinsicsAMDGPU.h"

namespace tessel::codegen::amdgpu {
namespace {

constexpr int kWaveThreads = 64;
// The most accumulator registers a thread keeps (eight 32 x 32 blocks).
constexpr int64_t kMaxSlots = 128;

class MfmaLayout final : public Layout {
 public:
  MfmaLayout(int64_t m, int64_t n, int waves) : m_(m), n_(n), waves_(waves) {}

  int64_t numel() const override { return m_ * n_; }
  int threads() const override { return waves_ * kWaveThreads; }
  int64_t slots() const override { return m_ / kMfmaBlock * (n_ / kMfmaBlock) / waves_ * kMfmaSlots; }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    const int64_t j = slot / kMfmaSlots, i = slot % kMfmaSlots, blocks_n = n_ / kMfmaBlock;
    llvm::Value* wave = b.CreateLShr(thread, 6);
    llvm::Value* lane = b.CreateAnd(thread, kWaveThreads - 1);
    llvm::Value* g = b.CreateAdd(wave, b.getInt64(j * waves_));
    // row = 32 (g / blocks_n) + 8 (i / 4) + 4 (lane / 32) + i % 4; col = 32 (g % blocks_n) + lane % 32
    llvm::Value* row = b.CreateMul(b.CreateUDiv(g, b.getInt64(blocks_n)), b.getInt64(kMfmaBlock));
    row = b.CreateAdd(row, b.CreateMul(b.CreateLShr(lane, 5), b.getInt64(4)));
    row = b.CreateAdd(row, b.getInt64(8 * (i / 4) + i % 4));
    llvm::Value* col = b.CreateMul(b.CreateURem(g, b.getInt64(blocks_n)), b.getInt64(kMfmaBlock));
    col = b.CreateAdd(col, b.CreateAnd(lane, 31));
    return b.CreateAdd(b.CreateMul(row, b.getInt64(n_)), col);
  }
  llvm::Value* valid(llvm::IRBuilder<>&, llvm::Value*, int64_t) const override { return nullptr; }
  int64_t element_at(int64_t thread, int64_t slot) const override {
    return mfma_accumulator_element(n_, waves_, thread, slot);
  }
  bool same_as(const Layout& other) const override {
    auto* o = dynamic_cast<const MfmaLayout*>(&other);
    return o != nullptr && o->m_ == m_ && o->n_ == n_ && o->waves_ == waves_;
  }

 private:
  int64_t m_, n_;
  int waves_;
};

// A plain tile in LDS holding an operand along `mn`: [mn, k] (K-major) or [k, mn].
bool fits(const MmaShape& s, const SharedMatrix& op, int64_t mn) {
  if (op.registers || op.swizzle != Swizzle::kNone) return false;
  return op.k_major ? op.rows == mn && op.cols == s.k : op.rows == s.k && op.cols == mn;
}

}  // namespace

std::shared_ptr<const Layout> mfma_layout(const MmaShape& s, const SharedMatrix& a, const SharedMatrix& b,
                                          int threads) {
  if (s.acc != f32 || s.tf32 || s.a != s.b || (s.a != bf16 && s.a != f16)) return nullptr;
  if (threads % kWaveThreads != 0) return nullptr;
  const int waves = threads / kWaveThreads;
  if (s.m % kMfmaBlock != 0 || s.n % kMfmaBlock != 0 || s.k % kMfmaK != 0) return nullptr;
  const int64_t blocks = s.m / kMfmaBlock * (s.n / kMfmaBlock);
  if (blocks % waves != 0 || blocks / waves * kMfmaSlots > kMaxSlots) return nullptr;
  if (!fits(s, a, s.m) || !fits(s, b, s.n)) return nullptr;
  return std::make_shared<MfmaLayout>(s.m, s.n, waves);
}

std::vector<llvm::Value*> emit_mfma(llvm::IRBuilder<>& b, const MmaShape& s, const SharedMatrix& a,
                                    const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* tid,
                                    int threads) {
  const int waves = threads / kWaveThreads;
  const int64_t blocks_n = s.n / kMfmaBlock, per_wave = s.m / kMfmaBlock * blocks_n / waves;
  llvm::Type* i16 = b.getInt16Ty();
  auto* quad = llvm::FixedVectorType::get(i16, 4);
  auto* block_acc = llvm::FixedVectorType::get(b.getFloatTy(), kMfmaSlots);
  llvm::Value* wave = b.CreateLShr(tid, 6);
  llvm::Value* lane = b.CreateAnd(tid, 31);
  llvm::Value* k_lane = b.CreateMul(b.CreateLShr(b.CreateAnd(tid, kWaveThreads - 1), 5), b.getInt64(4));
  // Four consecutive k (from k0 + this lane's four) of row or column `mn`.
  auto fragment = [&](const SharedMatrix& op, llvm::Value* mn, int64_t k0) -> llvm::Value* {
    llvm::Value* k = b.CreateAdd(k_lane, b.getInt64(k0));
    if (op.k_major) {  // contiguous along k: one 8-byte LDS read
      llvm::Value* at = b.CreateAdd(b.CreateMul(mn, b.getInt64(op.cols)), k);
      return b.CreateAlignedLoad(quad, b.CreateInBoundsGEP(i16, op.data, at), llvm::Align(8));
    }
    llvm::Value* v = llvm::PoisonValue::get(quad);
    for (int64_t e = 0; e < 4; ++e) {
      llvm::Value* at = b.CreateAdd(b.CreateMul(b.CreateAdd(k, b.getInt64(e)), b.getInt64(op.cols)), mn);
      v = b.CreateInsertElement(v, b.CreateLoad(i16, b.CreateInBoundsGEP(i16, op.data, at)), e);
    }
    return v;
  };
  const bool bf = s.a == bf16;
  const llvm::Intrinsic::ID id =
      bf ? llvm::Intrinsic::amdgcn_mfma_f32_32x32x8bf16_1k : llvm::Intrinsic::amdgcn_mfma_f32_32x32x8f16;
  auto* halves = llvm::FixedVectorType::get(b.getHalfTy(), 4);
  for (int64_t j = 0; j < per_wave; ++j) {
    llvm::Value* g = b.CreateAdd(wave, b.getInt64(j * waves));
    llvm::Value* row = b.CreateAdd(b.CreateMul(b.CreateUDiv(g, b.getInt64(blocks_n)), b.getInt64(kMfmaBlock)), lane);
    llvm::Value* col = b.CreateAdd(b.CreateMul(b.CreateURem(g, b.getInt64(blocks_n)), b.getInt64(kMfmaBlock)), lane);
    llvm::Value* c = llvm::PoisonValue::get(block_acc);
    for (int64_t i = 0; i < kMfmaSlots; ++i) c = b.CreateInsertElement(c, acc[j * kMfmaSlots + i], i);
    for (int64_t k0 = 0; k0 < s.k; k0 += kMfmaK) {
      llvm::Value* x = fragment(a, row, k0);
      llvm::Value* y = fragment(bm, col, k0);
      if (!bf) {
        x = b.CreateBitCast(x, halves);
        y = b.CreateBitCast(y, halves);
      }
      c = b.CreateIntrinsic(id, {}, {x, y, c, b.getInt32(0), b.getInt32(0), b.getInt32(0)});
    }
    for (int64_t i = 0; i < kMfmaSlots; ++i) acc[j * kMfmaSlots + i] = b.CreateExtractElement(c, i);
  }
  return acc;
}

}  // namespace tessel::codegen::amdgpu
