// TargetInfo's default tma_load and tma_store, the copy that targets without
// a tensor memory accelerator do in software, compiled for the host (whose
// other hooks it keeps) and compared byte for byte with the runtime's host
// copy engine on the same maps: ranks 1 to 3, f16 and f32, boxes at negative
// and past-the-end coordinates and at aligned ones inside (16-byte runs),
// element strides above 1, padded row strides, zero and NaN fill.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_join.h"
#include "codegen/host/software_tma.h"
#include "runtime/host/host_tma.h"
#include "runtime/tensor_map.h"
#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

// Host code from compile_host_software_tma, loaded and callable.
class SoftwareTmaKernel {
 public:
  static absl::StatusOr<SoftwareTmaKernel> build(KernelBuilder& k) {
    absl::StatusOr<Kernel> kernel = k.build();
    if (!kernel.ok()) return kernel.status();
    absl::StatusOr<DeviceCode> code = codegen::compile_host_software_tma(*kernel, CompileOptions{});
    if (!code.ok()) return code.status();
    // No symbols: a call into the copy engine would fail to link here.
    absl::StatusOr<std::unique_ptr<HostCode>> host = load_host_code(*code, {});
    if (!host.ok()) return host.status();
    return SoftwareTmaKernel(std::move(*host));
  }

  // One program; `args[i]` points to parameter i's value.
  void run(std::vector<void*> args) const {
    std::vector<std::byte> arena(code_->shared_bytes() + 128);
    HostProgram program{{0, 0, 0}, {1, 1, 1}, arena.data(), nullptr};
    code_->entry()(args.data(), &program);
  }

 private:
  explicit SoftwareTmaKernel(std::unique_ptr<HostCode> code) : code_(std::move(code)) {}
  std::shared_ptr<HostCode> code_;
};

// Random finite values (copies move their bits, whatever they are; NaNs
// are left out only so that no copy through float registers could quiet them).
void random_elements(Rng& rng, DType dtype, int64_t count, std::byte* dst) {
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == f16) {
      const Half h = random_float<Half>(rng, -8, 8);
      std::memcpy(dst + 2 * i, &h, 2);
    } else {
      const float f = random_float<float>(rng, -8, 8);
      std::memcpy(dst + 4 * i, &f, 4);
    }
  }
}

// A tensor in host memory and its spec, 16-byte aligned as TMA requires.
struct Tensor {
  TensorMapSpec spec;
  int64_t bytes = 0;
  std::vector<std::byte> storage;
  std::byte* data = nullptr;

  void allocate() {
    storage.assign(bytes + 16, std::byte{0});
    data = storage.data() + (16 - reinterpret_cast<uintptr_t>(storage.data()) % 16) % 16;
    spec.address = data;
  }
  // The same spec and contents at another address.
  Tensor copy() const {
    Tensor t{spec, bytes, {}, nullptr};
    t.allocate();
    std::memcpy(t.data, data, bytes);
    return t;
  }
};

// A random tensor for a box of `box`: dims from one element to past three
// boxes, rows padded by up to 48 bytes, outer element strides up to 3.

Tensor random_tensor(Rng& rng, DType dtype, const Shape& box) {
  const int rank = static_cast<int>(box.size());
  const int64_t elem = dtype.bytes();
  Tensor t;
  t.spec.dtype = dtype;
  t.spec.box = box;
  t.spec.oob_fill = rng.chance(0.5) ? TensorMapOobFill::kNan : TensorMapOobFill::kZero;
  t.spec.dims.resize(rank);
  t.spec.element_strides.assign(rank, 1);
  for (int d = 0; d < rank; ++d) {
    t.spec.dims[d] = rng.uniform(1, 3 * box[d] + 2);
    if (d + 1 < rank) t.spec.element_strides[d] = rng.uniform(1, 3);
  }
  // Byte strides, innermost first: at least the dimension inside, in 16-byte steps.
  t.spec.strides.resize(rank - 1);
  int64_t inner = t.spec.dims[rank - 1] * elem;
  for (int d = rank - 2; d >= 0; --d) {
    t.spec.strides[d] = (inner + 15) / 16 * 16 + 16 * rng.uniform(0, 3);
    inner = t.spec.strides[d] * t.spec.dims[d];
  }
  t.bytes = inner;
  t.allocate();
  random_elements(rng, dtype, t.bytes / elem, t.data);
  return t;
}

// Coordinates around the tensor: before it (negative), inside, and past its
// end. A third of the time the innermost one is 16-byte aligned with the
// box's row inside the tensor, where the software copy moves 16 bytes at once.
std::vector<int32_t> random_coords(Rng& rng, const TensorMapSpec& spec) {
  std::vector<int32_t> c;
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    const int64_t reach = spec.box[d] * spec.element_strides[d];
    c.push_back(static_cast<int32_t>(rng.uniform(-reach - 1, spec.dims[d] + 1)));
  }
  const int64_t run = 16 / spec.dtype.bytes(), room = spec.dims.back() - spec.box.back();
  if (room >= 0 && rng.chance(1.0 / 3)) c.back() = static_cast<int32_t>(run * rng.uniform(0, room / run));
  return c;
}

struct BoxCase {
  DType dtype;
  Shape box;
};

std::string case_name(const BoxCase& c) { return absl::StrCat(c.dtype.name(), " box ", shape_str(c.box)); }

// Tile shapes are powers of two, and innermost box dims span 16-byte
// multiples, as TMA requires; element strides make tiles of other shapes.
const BoxCase kCases[] = {
    {f32, {8}}, {f16, {32}}, {f32, {4, 4}}, {f16, {8, 8}}, {f32, {2, 4, 4}}, {f16, {4, 2, 16}},
};
constexpr int kTrials = 40;

TEST(SoftwareTma, LoadMatchesTheHostCopyEngine) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const BoxCase& bc : kCases) {
    SCOPED_TRACE(case_name(bc));
    const int rank = static_cast<int>(bc.box.size());
    KernelBuilder k("software_tma_load");
    Value map = k.tensor_map(bc.dtype, bc.box, "map");
    Value out = k.arg(ptr(bc.dtype), "out");
    std::vector<Operand> coords;
    for (int d = 0; d < rank; ++d) coords.push_back(k.arg(i32, absl::StrCat("c", d)));
    // [box] in shared memory; its first ceil(box / element_strides) elements are the tile.
    store(out + index_tile(k, bc.box), tma_load(map, coords));
    absl::StatusOr<SoftwareTmaKernel> kernel = SoftwareTmaKernel::build(k);
    TESSEL_ASSERT_OK(kernel.status());

    for (int trial = 0; trial < kTrials; ++trial) {
      Tensor t = random_tensor(rng, bc.dtype, bc.box);
      absl::StatusOr<TensorMap> m = TensorMap::encode_host(t.spec);
      TESSEL_ASSERT_OK(m.status());
      std::vector<int32_t> c = random_coords(rng, t.spec);
      SCOPED_TRACE(absl::StrCat("dims ", shape_str(t.spec.dims), " element strides ", shape_str(t.spec.element_strides),
                                " coords ", absl::StrJoin(c, ", "),
                                t.spec.oob_fill == TensorMapOobFill::kNan ? " NaN fill" : " zero fill"));
      const int64_t tile_bytes = m->tile_bytes();
      std::vector<std::byte> want(tile_bytes);
      host_tma_load(m->data(), c.data(), want.data());
      std::vector<std::byte> got(numel(bc.box) * bc.dtype.bytes(), std::byte{kPoison});
      void* out_ptr = got.data();
      std::vector<void*> args = {const_cast<void*>(m->data()), &out_ptr};
      for (int32_t& x : c) args.push_back(&x);
      kernel->run(args);
      for (int64_t i = 0; i < tile_bytes; ++i) {
        ASSERT_EQ(got[i], want[i]) << "byte " << i << " of the tile (" << tile_bytes << " bytes)";
      }
    }
  }
}

TEST(SoftwareTma, StoreMatchesTheHostCopyEngine) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const BoxCase& bc : kCases) {
    SCOPED_TRACE(case_name(bc));
    const int rank = static_cast<int>(bc.box.size());
    KernelBuilder k("software_tma_store");
    Value map = k.tensor_map(bc.dtype, bc.box, "map");
    Value src = k.arg(ptr(bc.dtype), "src");
    std::vector<Operand> coords;
    for (int d = 0; d < rank; ++d) coords.push_back(k.arg(i32, absl::StrCat("c", d)));
    tma_store(map, coords, load(src + index_tile(k, bc.box)));  // [box]
    absl::StatusOr<SoftwareTmaKernel> kernel = SoftwareTmaKernel::build(k);
    TESSEL_ASSERT_OK(kernel.status());

    for (int trial = 0; trial < kTrials; ++trial) {
      Tensor got = random_tensor(rng, bc.dtype, bc.box);
      Tensor want = got.copy();  // for the copy engine
      absl::StatusOr<TensorMap> got_map = TensorMap::encode_host(got.spec);
      absl::StatusOr<TensorMap> want_map = TensorMap::encode_host(want.spec);
      TESSEL_ASSERT_OK(got_map.status());
      TESSEL_ASSERT_OK(want_map.status());
      std::vector<int32_t> c = random_coords(rng, got.spec);
      SCOPED_TRACE(absl::StrCat("dims ", shape_str(got.spec.dims), " element strides ",
                                shape_str(got.spec.element_strides), " coords ", absl::StrJoin(c, ", ")));
      std::vector<std::byte> tile(numel(bc.box) * bc.dtype.bytes());  // the first tile_bytes() are the tile
      random_elements(rng, bc.dtype, numel(bc.box), tile.data());
      host_tma_store(want_map->data(), c.data(), tile.data());
      void* src_ptr = tile.data();
      std::vector<void*> args = {const_cast<void*>(got_map->data()), &src_ptr};
      for (int32_t& x : c) args.push_back(&x);
      kernel->run(args);
      for (int64_t i = 0; i < got.bytes; ++i) {
        ASSERT_EQ(got.data[i], want.data[i]) << "byte " << i << " of the tensor";
      }
    }
  }
}

}  // namespace
}  // namespace tessel::testing
