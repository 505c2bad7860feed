// Internal: PTX that LLVM 19 has no intrinsic for (TMA, mbarrier waits,
// wgmma), emitted as inline assembly by the NVPTX target's files.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"

namespace tessel::codegen::nvptx {

inline constexpr unsigned kShared = 3;
inline constexpr unsigned kGlobal = 1;

// `text` with `constraints` over `args`, returning `ret` (void, a value, or a
// struct of several outputs); by default always kept, never moved across
// other asm. With side_effects false it is a pure function of its operands,
// which LLVM may move, merge or drop like any arithmetic.
inline llvm::Value* inline_asm(llvm::IRBuilder<>& b, llvm::Type* ret, const std::string& text,
                               const std::string& constraints, const std::vector<llvm::Value*>& args,
                               bool side_effects = true) {
  std::vector<llvm::Type*> types;
  for (llvm::Value* a : args) types.push_back(a->getType());
  auto* type = llvm::FunctionType::get(ret, types, false);
  return b.CreateCall(llvm::InlineAsm::get(type, text, constraints, side_effects), args);
}
inline llvm::Value* pure_asm(llvm::IRBuilder<>& b, llvm::Type* ret, const std::string& text,
                             const std::string& constraints, const std::vector<llvm::Value*>& args) {
  return inline_asm(b, ret, text, constraints, args, /*side_effects=*/false);
}

// The asm operands $first, ..., $first + count - 1 as "{$first, ...}".
inline std::string register_list(int first, int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(absl::StrCat("$", first + i));
  return absl::StrCat("{", absl::StrJoin(names, ", "), "}");
}

// The 32-bit shared-window address of a generic pointer into shared memory.
inline llvm::Value* shared32(llvm::IRBuilder<>& b, llvm::Value* generic) {
  return b.CreatePtrToInt(b.CreateAddrSpaceCast(generic, b.getPtrTy(kShared)), b.getInt32Ty());
}

}  // namespace tessel::codegen::nvptx
