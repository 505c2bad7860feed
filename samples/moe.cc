// A whole mixture-of-experts layer, Mixtral's (samples/moe.h MoeLayer): the
// router picks each token's top 2 of 8 experts, the choices are grouped by
// expert, the tokens' rows are copied into that order, and the experts'
// SwiGLU MLPs run as two grouped GEMMs over them (the second scaled by the
// router's weights), whose rows are summed back per token. bf16
// activations and weights, f32 accumulation; on NVIDIA GPUs both GEMMs run
// on the tensor cores, warp-specialized, their operands read by TMA (on
// AMD GPUs the layer takes the gathering GEMMs, which read the tokens' rows
// through pointers). It checks the router's logits against
// a double reference, its choices against the host's choice from those
// logits, and the layer's output against a double reference of the
// experts that rounds where the layer does; then runs the same experts in
// fp8 (e4m3 weights with a scale per expert, static activation scales) and
// checks that against the reference that quantizes where the layer does.
#include "moe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

#include "base/float16.h"
#include "base/float8.h"
#include "common.h"

using namespace tessel;

namespace {

// `count` bf16 values uniform in [-scale, scale]: their bits, and as floats.
std::vector<uint16_t> random_bf16(int64_t count, float scale, std::mt19937& gen, std::vector<float>& values) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> bits(count);
  values.resize(count);
  for (int64_t i = 0; i < count; ++i) values[i] = bf16_to_float(bits[i] = float_to_bf16(dist(gen)));
  return bits;
}

template <class T>
Buffer upload(const Device& dev, const std::vector<T>& v) {
  Buffer b = samples::value_or_die(dev.allocate(v.size() * sizeof(T)), "allocate");
  samples::ok_or_die(dev.copy_to_device(b, v.data(), v.size() * sizeof(T)), "copy");
  return b;
}

// The weights `w` of `experts` experts in e4m3, each expert's by the scale
// that maps its largest magnitude onto e4m3's largest (448): their bits,
// with the scales (into `scales`) and the values the bits hold.
std::vector<uint8_t> quantize(const std::vector<float>& w, int64_t experts, std::vector<float>& scales,
                              std::vector<float>& values) {
  const int64_t each = static_cast<int64_t>(w.size()) / experts;
  std::vector<uint8_t> bits(w.size());
  values.resize(w.size());
  for (int64_t e = 0; e < experts; ++e) {
    float largest = 0;
    for (int64_t i = e * each; i < (e + 1) * each; ++i) largest = std::max(largest, std::fabs(w[i]));
    const float scale = largest > 0 ? largest / 448 : 1;
    scales.push_back(scale);
    for (int64_t i = e * each; i < (e + 1) * each; ++i) {
      bits[i] = float_to_float8(w[i] / scale, Float8::kE4M3);
      values[i] = float8_to_float(bits[i], Float8::kE4M3);
    }
  }
  return bits;
}

template <class T>
std::vector<T> download(const Device& dev, const Buffer& b, int64_t count) {
  std::vector<T> out(count);
  samples::ok_or_die(dev.copy_to_host(out.data(), b, count * sizeof(T)), "copy back");
  return out;
}

samples::MoeLayerOutputs outputs(const Device& dev, const samples::MoeLayerConfig& c, int64_t tokens,
                                 const samples::MoeLayer::Workspace& ws, const Buffer& out) {
  return samples::value_or_die(samples::moe_layer_outputs(dev, c, tokens, ws, out), "download");
}

// Prints a layer's stages' worst errors over their bounds; true if all are
// within them.
bool report(const char* what, const samples::MoeStageErrors& e) {
  std::printf("%s stages, worst error over its bound: h %.3g, a %.3g, y %.3g, out %.3g: %s\n", what, e.h, e.a, e.y,
              e.out, e.first.empty() ? "OK" : "FAILED");
  if (!e.first.empty()) std::printf("  first: %s\n", e.first.c_str());
  return e.first.empty();
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  // Tokens not a multiple of the blocks; sizes small enough for the host's
  // double reference.
  const int64_t tokens = 300;
  samples::MoeLayerConfig config = {.experts = 8, .top_k = 2, .hidden = 512, .intermediate = 704};
  std::optional<Device> opened;  // where the sample runs, rather than emits for --target
  if (args.target.empty()) opened = samples::value_or_die(samples::open_device(args), "device");
  const std::string arch = opened ? opened->arch() : args.target;
  if (arch.rfind("gfx", 0) == 0) {  // AMD: tiles that fit in 64 KiB of LDS
    config.up = config.down = {.bm = 64, .bn = 64, .bk = 64, .stages = 1};
    config.gemm_warps = 4;
    config.grouped = false;
  }
  if (arch.rfind("sm_8", 0) == 0) {  // before Hopper: 128 x 128 tiles on mma.sync
    config.up.bn = config.down.bn = 128;
    config.gemm_warps = 8;
  }
  const samples::MoeLayerKernels k = samples::value_or_die(samples::moe_layer_kernels(config), "build");
  CompileOptions gemm = samples::compile_options(args), small = gemm;
  gemm.num_warps = config.gemm_warps;
  small.num_warps = samples::kMoeLayerSmallWarps;
  if (!args.target.empty()) {
    samples::emit_for_target(args, {k.up, k.down}, gemm);
    std::vector<Kernel> rest = {k.logits, k.pick, k.combine};
    for (const std::optional<Kernel>& extra : {k.act, k.permute, k.quantize}) {
      if (extra) rest.push_back(*extra);
    }
    samples::emit_for_target(args, rest, small);
    return 0;
  }
  const Device device = *opened;
  const samples::MoeLayer layer = samples::value_or_die(samples::MoeLayer::compile(device, config), "compile");
  if (!args.emit_dir.empty()) return 0;

  // Scales that keep h, a and the output near 1.
  const int64_t e = config.experts, hid = config.hidden, inter = config.intermediate;
  std::mt19937 gen(args.seed);
  std::vector<float> x, gate, w1, w2;
  const std::vector<uint16_t> hx = random_bf16(tokens * hid, 1.0f, gen, x);
  const std::vector<uint16_t> hgate = random_bf16(e * hid, 0.2f, gen, gate);
  const std::vector<uint16_t> hw1 = random_bf16(e * 2 * inter * hid, 2 * std::sqrt(3.0f / hid), gen, w1);
  const std::vector<uint16_t> hw2 = random_bf16(e * hid * inter, std::sqrt(3.0f / inter), gen, w2);
  const Buffer dx = upload(device, hx), dgate = upload(device, hgate), dw1 = upload(device, hw1),
               dw2 = upload(device, hw2);
  const Buffer dout = upload(device, std::vector<uint16_t>(tokens * hid, 0x7FC0));  // poisoned with NaN
  const samples::MoeLayer::Workspace ws = samples::value_or_die(layer.workspace(tokens), "workspace");
  samples::ok_or_die(layer.launch(dx, static_cast<int32_t>(tokens), dgate, dw1, dw2, dout, ws), "launch");
  samples::ok_or_die(device.synchronize(), "synchronize");
  std::printf("moe layer: %lld tokens x top %d of %lld experts, H %lld, I %lld, bf16, on %s\n",
              static_cast<long long>(tokens), config.top_k, static_cast<long long>(e), static_cast<long long>(hid),
              static_cast<long long>(inter), device.name().c_str());

  // The router's logits, then its choices from those logits.
  const std::vector<float> logits = download<float>(device, ws.logits, tokens * e);
  const std::vector<double> want_logits = samples::moe_logits_reference(x, gate, tokens, e, hid);
  bool ok = samples::check_close("router logits", logits, want_logits, 1e-4);
  const int64_t n = tokens * config.top_k;
  const std::vector<int32_t> ids = download<int32_t>(device, ws.ids, n);
  const std::vector<float> weights = download<float>(device, ws.weights, n);
  std::vector<double> want_weights(n);
  int64_t wrong = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const samples::RouterPick pick = samples::router_reference(&logits[t * e], config.experts, config.top_k);
    for (int j = 0; j < config.top_k; ++j) {
      wrong += ids[t * config.top_k + j] != pick.ids[j];
      want_weights[t * config.top_k + j] = pick.weights[j];
    }
  }
  std::printf("router choices: %lld of %lld differ from the host's: %s\n", static_cast<long long>(wrong),
              static_cast<long long>(n), wrong == 0 ? "OK" : "FAILED");
  ok = ok && wrong == 0 && samples::check_close("router weights", weights, want_weights, 1e-5);

  // Each stage against a reference from the stage before it, as the device
  // left it (samples::moe_check_token).
  ok = report("layer", samples::moe_check_layer(config, x, outputs(device, config, tokens, ws, dout), w1, w2)) && ok;

  // The same experts in fp8, as an fp8 checkpoint holds them: each expert's
  // weights in e4m3 by a scale that maps their largest onto e4m3's (448),
  // and static scales for x (within [-1, 1]) and a.
  samples::MoeLayerConfig fp8 = config;
  fp8.up.in = fp8.down.in = f8e4m3;
  fp8.up.bk = fp8.down.bk = 128;  // rows of 128 bytes
  samples::MoeFp8Reference scales = {.x = 1.0f / 448, .a = 1.0f / 32, .w1 = {}, .w2 = {}};
  std::vector<float> w1q, w2q;
  const std::vector<uint8_t> hw1q = quantize(w1, e, scales.w1, w1q), hw2q = quantize(w2, e, scales.w2, w2q);
  const samples::MoeLayer layer8 = samples::value_or_die(samples::MoeLayer::compile(device, fp8), "compile fp8");
  const samples::MoeLayer::Workspace ws8 = samples::value_or_die(layer8.workspace(tokens), "workspace");
  const samples::MoeLayer::Fp8Scales dscales = {upload(device, std::vector<float>{scales.x}), upload(device, scales.w1),
                                                upload(device, std::vector<float>{scales.a}),
                                                upload(device, scales.w2)};
  samples::ok_or_die(device.copy_to_device(dout, std::vector<uint16_t>(tokens * hid, 0x7FC0).data(), tokens * hid * 2),
                     "poison");
  samples::ok_or_die(layer8.launch(dx, static_cast<int32_t>(tokens), dgate, upload(device, hw1q), upload(device, hw2q),
                                   dscales, dout, ws8),
                     "launch fp8");
  samples::ok_or_die(device.synchronize(), "synchronize");
  ok = report("fp8 layer",
              samples::moe_check_layer(fp8, x, outputs(device, fp8, tokens, ws8, dout), w1q, w2q, &scales)) &&
       ok;
  return ok ? 0 : 1;
}
