// Reading ptxas's notes from the driver's JIT log.
#include "runtime/cuda/jit_notes.h"

#include <string>

#include "gtest/gtest.h"

namespace tessel::cuda {
namespace {

TEST(JitNotes, SerializedWgmmaIsSeenWhateverItsCause) {
  // The note of ptxas 13.0 compiling a stream-K GEMM (a 64-bit division) as
  // relocatable code, and one among other notes.
  const std::string call =
      "ptxas info    : (C7509) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the "
      "presence of Extern calls in the function 'gemm'";
  EXPECT_TRUE(wgmma_serialized(call));
  EXPECT_TRUE(wgmma_serialized("ptxas info    : 0 bytes gmem\n" + call + "\nptxas info    : Used 223 registers"));
  EXPECT_TRUE(wgmma_serialized(
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
      "insufficient register resources for the wgmma pipeline in the function 'gemm'"));
}

TEST(JitNotes, OtherNotesAreNot) {
  EXPECT_FALSE(wgmma_serialized(""));
  EXPECT_FALSE(wgmma_serialized("ptxas info    : 0 bytes gmem\nptxas info    : Used 156 registers, used 1 barriers"));
  EXPECT_FALSE(wgmma_serialized("ptxas info    : (C7517) warpgroup.wait is injected in around line 777 by compiler "
                                "to allow use of registers defined by GMMA in function 'gemm'"));
}

}  // namespace
}  // namespace tessel::cuda
