// Uses tessel only through the installed headers and tessel::tessel: builds a
// small kernel, prints it, and exits 0 iff building it succeeded.
#include <cstdio>

#include <tessel/tessel.h>

int main() {
  tessel::KernelBuilder k("scale");
  auto x = k.arg(tessel::ptr(tessel::f32), "x");
  auto y = k.arg(tessel::ptr(tessel::f32), "y");
  auto n = k.arg(tessel::i32, "n");
  auto offs = k.program_id() * 128 + k.arange(0, 128);  // [128] i32
  auto mask = offs < n;                                 // [128] i1
  auto v = tessel::load(x + offs, mask, k.constant(0, tessel::f32));
  tessel::store(y + offs, v * k.constant(2, tessel::f32), mask);

  absl::StatusOr<tessel::Kernel> kernel = k.build();
  if (!kernel.ok()) {
    std::fprintf(stderr, "build() failed: %s\n", kernel.status().ToString().c_str());
    return 1;
  }
  std::printf("%s", kernel->str().c_str());
  return 0;
}
