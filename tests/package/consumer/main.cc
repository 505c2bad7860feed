// Uses tessel only through the installed headers and library, as a user's
// program would: builds a small kernel, runs it on the host device, and exits
// 0 iff every value it wrote is right. Passing an absl::Status across the
// library boundary also checks that this program and libtessel.so agree on
// Abseil's types.
#include <cstdio>
#include <vector>

#include <tessel/tessel.h>

int main() {
  constexpr int kBlock = 128;
  tessel::KernelBuilder k("scale");
  auto x = k.arg(tessel::ptr(tessel::f32), "x");
  auto y = k.arg(tessel::ptr(tessel::f32), "y");
  auto n = k.arg(tessel::i32, "n");
  auto offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [kBlock] i32
  auto mask = offs < n;                                       // [kBlock] i1
  auto v = tessel::load(x + offs, mask, k.constant(0, tessel::f32));
  tessel::store(y + offs, v * k.constant(2, tessel::f32), mask);

  absl::StatusOr<tessel::Kernel> kernel = k.build();
  if (!kernel.ok()) {
    std::fprintf(stderr, "build() failed: %s\n", kernel.status().ToString().c_str());
    return 1;
  }
  // One program's worth and a partial one: the mask matters.
  const int count = kBlock + 37;
  absl::Status status = [&]() -> absl::Status {
    absl::StatusOr<tessel::Device> device = tessel::Device::open("host:1");
    if (!device.ok()) return device.status();
    absl::StatusOr<tessel::Function> fn = device->compile(*kernel);
    if (!fn.ok()) return fn.status();
    std::vector<float> hx(count), hy(count, -1.0f);
    for (int i = 0; i < count; ++i) hx[i] = 0.5f * i - 7;
    const size_t bytes = count * sizeof(float);
    absl::StatusOr<tessel::Buffer> bx = device->allocate(bytes);
    if (!bx.ok()) return bx.status();
    absl::StatusOr<tessel::Buffer> by = device->allocate(bytes);
    if (!by.ok()) return by.status();
    if (absl::Status s = device->copy_to_device(*bx, hx.data(), bytes); !s.ok()) return s;
    if (absl::Status s = device->copy_to_device(*by, hy.data(), bytes); !s.ok()) return s;
    if (absl::Status s = fn->launch({.grid = (count + kBlock - 1) / kBlock}, *bx, *by, count); !s.ok()) return s;
    if (absl::Status s = device->copy_to_host(hy.data(), *by, bytes); !s.ok()) return s;
    for (int i = 0; i < count; ++i) {
      if (hy[i] != 2 * hx[i]) {
        std::fprintf(stderr, "y[%d] = %g, want %g\n", i, hy[i], 2 * hx[i]);
        return absl::InternalError("wrong result");
      }
    }
    std::printf("scale on %s: %d values OK\n", device->name().c_str(), count);
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
