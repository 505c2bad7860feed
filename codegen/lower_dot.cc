// dot: acc + a @ b on tiles. Lowering converts the accumulator to and from
// the accumulation type; the product itself is the target's (TargetInfo::dot),
// whose default, a loop any target runs, is here too.
#include "codegen/lowering.h"

namespace tessel::codegen {

absl::Status Lowering::dot(const Op& o, const Type& rt) {
  const Type& at = ir_.type(o.operands[0]);
  const Type& bt = ir_.type(o.operands[1]);
  int64_t m = at.shape()[0], k = at.shape()[1], n = bt.shape()[1];
  DType in = at.dtype(), out_d = rt.dtype();
  DType acc_d = in == f64 ? f64 : (in == i8 ? i32 : f32);
  Type acc_tile = Type::tile(acc_d, rt.shape());
  // Where the sum goes: a new buffer that the target fills from c when c
  // already has the accumulation type, else c converted, summed into in place.
  llvm::Value* sum = acc_d == out_d ? new_buffer(rt) : new_buffer(acc_tile);
  llvm::Value* c = val(o.operands[2]);
  llvm::Value* acc = sum;
  if (acc_d == out_d) {
    acc = c;
  } else {
    tile_loop(rt.numel(),
              [&](llvm::Value* i) { store_elem(sum, acc_tile, i, ops_.convert(load_elem(c, rt, i), out_d, acc_d)); });
  }
  llvm::Value* a = val(o.operands[0]);
  llvm::Value* bv = val(o.operands[1]);
  target_.dot(b_, MatrixTile{a, in, m, k, k}, MatrixTile{bv, in, k, n, n}, MatrixTile{acc, acc_d, m, n, n},
              MatrixTile{sum, acc_d, m, n, n});
  if (acc_d == out_d) {
    set(o, sum);
    return absl::OkStatus();
  }
  llvm::Value* result = new_buffer(rt);
  tile_loop(rt.numel(), [&](llvm::Value* i) {
    store_elem(result, rt, i, ops_.convert(load_elem(sum, acc_tile, i), acc_d, out_d));
  });
  set(o, result);
  return absl::OkStatus();
}

void TargetInfo::dot(llvm::IRBuilder<>& b, const MatrixTile& lhs, const MatrixTile& rhs, const MatrixTile& acc,
                     const MatrixTile& result) {
  ScalarOps ops(b, *this);
  const DType acc_d = result.dtype;
  auto element = [&](const MatrixTile& t, llvm::Value* row, llvm::Value* col) {
    llvm::Value* i = b.CreateAdd(b.CreateMul(row, b.getInt64(t.row_stride)), col);
    return b.CreateInBoundsGEP(ops.reg_type(t.dtype), t.data, i);
  };
  auto load = [&](const MatrixTile& t, llvm::Value* row, llvm::Value* col) {
    return b.CreateLoad(ops.reg_type(t.dtype), element(t, row, col));
  };
  if (acc.data != result.data) {
    auto dense = [](const MatrixTile& t) { return t.row_stride == t.cols; };
    tile_loop(b, result.rows * result.cols, [&](llvm::Value* i) {
      if (dense(acc) && dense(result)) {
        llvm::Type* t = ops.reg_type(acc_d);
        b.CreateStore(b.CreateLoad(t, b.CreateInBoundsGEP(t, acc.data, i)), b.CreateInBoundsGEP(t, result.data, i));
        return;
      }
      llvm::Value* row = b.CreateUDiv(i, b.getInt64(result.cols));
      llvm::Value* col = b.CreateURem(i, b.getInt64(result.cols));
      b.CreateStore(load(acc, row, col), element(result, row, col));
    });
  }
  // Rows are spread over the program's threads; each owns its rows of the result.
  const int64_t k = lhs.cols, n = rhs.cols;
  tile_loop(b, lhs.rows, [&](llvm::Value* mi) {
    emit_loop(b, b.getInt64(0), b.getInt64(k), b.getInt64(1), [&](llvm::Value* ki) {
      llvm::Value* av = ops.convert(load(lhs, mi, ki), lhs.dtype, acc_d);
      emit_loop(b, b.getInt64(0), b.getInt64(n), b.getInt64(1), [&](llvm::Value* ni) {
        llvm::Value* bval = ops.convert(load(rhs, ki, ni), rhs.dtype, acc_d);
        llvm::Value* p = element(result, mi, ni);
        llvm::Value* cur = b.CreateLoad(ops.reg_type(acc_d), p);
        llvm::Value* prod = acc_d.is_float() ? b.CreateFMul(av, bval) : b.CreateMul(av, bval);
        b.CreateStore(acc_d.is_float() ? b.CreateFAdd(cur, prod) : b.CreateAdd(cur, prod), p);
      });
    });
  });
}

}  // namespace tessel::codegen
