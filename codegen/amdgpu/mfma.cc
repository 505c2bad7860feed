#include "codegen/amdgpu/mfma.h"

#include <optional>

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

// An MFMA instruction for 32 x 32 blocks: bf16 or f16 into f32, k8 (four
// k a lane), or i8 or fp8 into i32 or f32, k16 (eight k a lane, one i64
// register); the accumulator is laid out alike (mfma_fragment.h).
struct Form {
  llvm::Intrinsic::ID id;
  int64_t k;  // per instruction; a lane holds k / 2 of them
};

std::optional<Form> form_of(const MmaShape& s) {
  if (s.tf32) return std::nullopt;
  if (s.a.is_float8() && s.b.is_float8() && s.acc == f32) {
    const bool a4 = s.a == f8e4m3, b4 = s.b == f8e4m3;  // fp8: e4m3; bf8: e5m2
    const llvm::Intrinsic::ID id = a4 ? (b4 ? llvm::Intrinsic::amdgcn_mfma_f32_32x32x16_fp8_fp8
                                            : llvm::Intrinsic::amdgcn_mfma_f32_32x32x16_fp8_bf8)
                                      : (b4 ? llvm::Intrinsic::amdgcn_mfma_f32_32x32x16_bf8_fp8
                                            : llvm::Intrinsic::amdgcn_mfma_f32_32x32x16_bf8_bf8);
    return Form{id, 2 * kMfmaK};
  }
  if (s.a != s.b) return std::nullopt;
  if (s.acc == f32 && s.a == bf16) return Form{llvm::Intrinsic::amdgcn_mfma_f32_32x32x8bf16_1k, kMfmaK};
  if (s.acc == f32 && s.a == f16) return Form{llvm::Intrinsic::amdgcn_mfma_f32_32x32x8f16, kMfmaK};
  if (s.acc == i32 && s.a == i8) return Form{llvm::Intrinsic::amdgcn_mfma_i32_32x32x16_i8, 2 * kMfmaK};
  return std::nullopt;
}

// gfx942's MFMA reads fp8 in the FNUZ encodings, whose exponent bias is one
// more than the OCP encodings' tessel stores (e4m3fnuz 8 against e4m3fn's
// 7, e5m2fnuz 16 against e5m2's 15): the same byte is worth half as much,
// subnormals included, so a product of two is worth a quarter, which the
// accumulator takes back exactly (a power of two). Only 0x80 differs
// otherwise: OCP's -0 is FNUZ's NaN, so it becomes +0. (OCP's NaNs and
// e5m2's infinities read as large finite FNUZ values: such operands do not
// propagate.)
constexpr float kFnuzProduct = 0.25f;
llvm::Value* fnuz_from_ocp(llvm::IRBuilder<>& b, llvm::Value* bytes) {  // an i64 of eight fp8
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7Full, kHigh = 0x8080808080808080ull;
  // z: 0x80 in each byte of m that is zero, exactly (no borrow between bytes).
  llvm::Value* m = b.CreateXor(bytes, b.getInt64(kHigh));  // zero where the byte is 0x80
  llvm::Value* t = b.CreateAdd(b.CreateAnd(m, b.getInt64(kLow7)), b.getInt64(kLow7));
  llvm::Value* z = b.CreateNot(b.CreateOr(b.CreateOr(t, m), b.getInt64(kLow7)));
  return b.CreateAnd(bytes, b.CreateNot(z));
}

// A plain tile in LDS holding an operand along `mn`: [mn, k] (K-major) or [k, mn].
bool fits(const MmaShape& s, const SharedMatrix& op, int64_t mn) {
  if (op.registers || op.swizzle != Swizzle::kNone) return false;
  return op.k_major ? op.rows == mn && op.cols == s.k : op.rows == s.k && op.cols == mn;
}

}  // namespace

std::shared_ptr<const Layout> mfma_layout(const MmaShape& s, const SharedMatrix& a, const SharedMatrix& b,
                                          int threads) {
  const std::optional<Form> f = form_of(s);
  if (!f || threads % kWaveThreads != 0) return nullptr;
  const int waves = threads / kWaveThreads;
  if (s.m % kMfmaBlock != 0 || s.n % kMfmaBlock != 0 || s.k % f->k != 0) return nullptr;
  const int64_t blocks = s.m / kMfmaBlock * (s.n / kMfmaBlock);
  if (blocks % waves != 0 || blocks / waves * kMfmaSlots > kMaxSlots) return nullptr;
  if (!fits(s, a, s.m) || !fits(s, b, s.n)) return nullptr;
  return std::make_shared<MfmaLayout>(s.m, s.n, waves);
}

std::vector<llvm::Value*> emit_mfma(llvm::IRBuilder<>& b, const MmaShape& s, const SharedMatrix& a,
                                    const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* tid,
                                    int threads) {
  const Form f = *form_of(s);
  const int waves = threads / kWaveThreads;
  const int64_t blocks_n = s.n / kMfmaBlock, per_wave = s.m / kMfmaBlock * blocks_n / waves, per_lane = f.k / 2;
  // A lane's k values: four 16-bit or eight 8-bit, 8 bytes either way.
  const bool fp8 = s.a.is_float8();
  llvm::Type* elem = s.a.bytes() == 1 ? b.getInt8Ty() : b.getInt16Ty();
  auto* pack = llvm::FixedVectorType::get(elem, per_lane);
  auto* block_acc = llvm::FixedVectorType::get(s.acc == i32 ? b.getInt32Ty() : b.getFloatTy(), kMfmaSlots);
  llvm::Value* wave = b.CreateLShr(tid, 6);
  llvm::Value* lane = b.CreateAnd(tid, 31);
  llvm::Value* k_lane = b.CreateMul(b.CreateLShr(b.CreateAnd(tid, kWaveThreads - 1), 5), b.getInt64(per_lane));
  // This lane's consecutive k (from k0) of row or column `mn`, as the
  // instruction takes them.
  auto fragment = [&](const SharedMatrix& op, llvm::Value* mn, int64_t k0) -> llvm::Value* {
    llvm::Value* k = b.CreateAdd(k_lane, b.getInt64(k0));
    llvm::Value* v = nullptr;
    if (op.k_major) {  // contiguous along k: one 8-byte LDS read
      llvm::Value* at = b.CreateAdd(b.CreateMul(mn, b.getInt64(op.cols)), k);
      v = b.CreateAlignedLoad(pack, b.CreateInBoundsGEP(elem, op.data, at), llvm::Align(8));
    } else {
      v = llvm::PoisonValue::get(pack);
      for (int64_t e = 0; e < per_lane; ++e) {
        llvm::Value* at = b.CreateAdd(b.CreateMul(b.CreateAdd(k, b.getInt64(e)), b.getInt64(op.cols)), mn);
        v = b.CreateInsertElement(v, b.CreateLoad(elem, b.CreateInBoundsGEP(elem, op.data, at)), e);
      }
    }
    if (s.a == f16) return b.CreateBitCast(v, llvm::FixedVectorType::get(b.getHalfTy(), 4));
    if (fp8) return fnuz_from_ocp(b, b.CreateBitCast(v, b.getInt64Ty()));
    if (s.a == i8) return b.CreateBitCast(v, b.getInt64Ty());
    return v;
  };
  for (int64_t j = 0; j < per_wave; ++j) {
    llvm::Value* g = b.CreateAdd(wave, b.getInt64(j * waves));
    llvm::Value* row = b.CreateAdd(b.CreateMul(b.CreateUDiv(g, b.getInt64(blocks_n)), b.getInt64(kMfmaBlock)), lane);
    llvm::Value* col = b.CreateAdd(b.CreateMul(b.CreateURem(g, b.getInt64(blocks_n)), b.getInt64(kMfmaBlock)), lane);
    // fp8: the sum in FNUZ's quarter units (fnuz_from_ocp), scaled back after.
    llvm::Value* c = llvm::PoisonValue::get(block_acc);
    for (int64_t i = 0; i < kMfmaSlots; ++i) {
      llvm::Value* v = acc[j * kMfmaSlots + i];
      c = b.CreateInsertElement(c, fp8 ? b.CreateFMul(v, llvm::ConstantFP::get(b.getFloatTy(), kFnuzProduct)) : v, i);
    }
    for (int64_t k0 = 0; k0 < s.k; k0 += f.k) {
      c = b.CreateIntrinsic(
          f.id, {}, {fragment(a, row, k0), fragment(bm, col, k0), c, b.getInt32(0), b.getInt32(0), b.getInt32(0)});
    }
    for (int64_t i = 0; i < kMfmaSlots; ++i) {
      llvm::Value* v = b.CreateExtractElement(c, i);
      acc[j * kMfmaSlots + i] = fp8 ? b.CreateFMul(v, llvm::ConstantFP::get(b.getFloatTy(), 1 / kFnuzProduct)) : v;
    }
  }
  return acc;
}

}  // namespace tessel::codegen::amdgpu
