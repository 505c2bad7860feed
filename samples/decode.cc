// Decoding attention over a paged KV cache (samples/decode.h): a batch of
// sequences of different lengths, one of them empty, whose keys and values
// lie in shuffled pages of a shared cache, 32 query heads on 8 KV heads
// (grouped-query attention, as Llama 3 8B), head dimension 128. Run with
// the split count chosen for the device and with the keys split five ways
// (each KV head's splits combined by the last to finish); both are checked
// against a double reference.
#include "decode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "base/float16.h"
#include "common.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  const samples::DecodeConfig c = {.d = 128, .group = 4, .page = 16, .bn = 64};
  const std::vector<int32_t> lens = {1000, 37, 0, 1531, 64};
  const int64_t batch = static_cast<int64_t>(lens.size()), kv_heads = 8, heads = kv_heads * c.group;
  const int64_t max_pages = 96;  // 1536 keys a sequence at most
  Kernel kernel = samples::value_or_die(samples::decode_kernel(c), "build");
  CompileOptions options = samples::compile_options(args);
  options.num_warps = c.warps;
  if (samples::emit_for_target(args, {kernel}, options)) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");

  // Each sequence's pages, drawn at random from the cache's.
  std::mt19937 gen(args.seed);
  int64_t pages = 0;
  for (int32_t len : lens) pages += (len + c.page - 1) / c.page;
  pages += 7;  // and some no sequence holds
  std::vector<int32_t> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), gen);
  std::vector<int32_t> table(batch * max_pages, 0);
  int64_t next = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < (lens[b] + c.page - 1) / c.page; ++p) table[b * max_pages + p] = order[next++];
  }

  std::uniform_real_distribution<float> dist(-1, 1);
  auto random_bf16 = [&](int64_t n, std::vector<double>& values) {
    std::vector<uint16_t> bits(n);
    values.resize(n);
    for (int64_t i = 0; i < n; ++i) values[i] = bf16_to_float(bits[i] = float_to_bf16(dist(gen)));
    return bits;
  };
  auto put = [&](const void* data, size_t bytes) {
    Buffer buf = samples::value_or_die(device.allocate(bytes), "allocate");
    samples::ok_or_die(device.copy_to_device(buf, data, bytes), "copy");
    return buf;
  };
  std::vector<double> qd, kd, vd;
  const int64_t cache = pages * c.page * kv_heads * c.d;
  const std::vector<uint16_t> q = random_bf16(batch * heads * c.d, qd), k = random_bf16(cache, kd),
                              v = random_bf16(cache, vd);
  Buffer bq = put(q.data(), q.size() * 2), bk = put(k.data(), k.size() * 2), bv = put(v.data(), v.size() * 2);
  Buffer bt = put(table.data(), table.size() * 4), bl = put(lens.data(), lens.size() * 4);
  Buffer bo = samples::value_or_die(device.allocate(batch * heads * c.d * 2), "allocate");
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const std::vector<double> want =
      samples::decode_reference(qd, kd, vd, table, lens, kv_heads, c.group, c.d, c.page, max_pages, scale);
  std::printf("decode on %s: %lld sequences, %lld query heads on %lld KV heads, pages of %lld keys\n",
              device.name().c_str(), static_cast<long long>(batch), static_cast<long long>(heads),
              static_cast<long long>(kv_heads), static_cast<long long>(c.page));
  bool ok = true;
  for (int splits : {0, 5}) {
    samples::Decode decode =
        samples::value_or_die(samples::Decode::compile(device, c, batch, kv_heads, max_pages, splits), "compile");
    samples::ok_or_die(decode.run(bq, bk, bv, bt, bl, bo, scale), "run");
    samples::ok_or_die(device.synchronize(), "synchronize");
    std::vector<uint16_t> out(batch * heads * c.d);
    samples::ok_or_die(device.copy_to_host(out.data(), bo, out.size() * 2), "copy back");
    std::vector<float> got(out.size());
    std::transform(out.begin(), out.end(), got.begin(), bf16_to_float);
    // P is rounded to bf16 before P V, and O once more.
    const std::string what = absl::StrCat("decode, keys in ", decode.splits(), " split(s)");
    ok = samples::check_close(what.c_str(), got, want, 8e-3) && ok;
  }
  return ok ? 0 : 1;
}
