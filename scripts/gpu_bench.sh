#!/usr/bin/env bash
# gpu_bench.sh — run tessel's GPU benchmarks and their baselines in one go.
#
# Run from the repository root on the GPU machine after scripts/gpu_run.sh
# unpacked the package into /tmp/tessel. Writes each benchmark's output to
# $OUT/<name>.log and, where the benchmark writes one, its JSON to $OUT/<name>.json:
#   gpu_bench        launch cost, graph replay, JIT latency, TMA copy bandwidth
#   triton           Triton 3.6 and cuBLAS on the same GPU (bench/triton_compare.py), on
#                    gemm_bench's tensors when gemm runs before it (the default order)
#   plan_bench_rN    triggered plans at N ranks (2, and every GPU when more): bandwidth,
#                    latency and overlap against raw copies
#   nccl_rN          producer + NCCL all-gather at N ranks
#   gemm_bench       the tensor-core GEMM at the target shapes, per tile configuration
#   gemm_shapes      the GEMM autotuned (split-K among the candidates) at the shapes of
#   triton_shapes    $GEMM_SHAPES, then cuBLAS and Triton at the same shapes
#   cache_bench      first compile in a new process, disk cache empty and filled
#   norm_bench       row softmax, layer norm, RMS norm, prefix sums and sorts against a device copy, then
#   norm_compare     torch eager, torch.compile and Triton on the same shapes, with the ratios
#   attn_bench       attention forward (4 x 32 heads, lengths 1024 to 16384, d 64 and 128, causal
#   attn_compare     or not), then torch's scaled_dot_product_attention backends and Triton
#   attn_bwd_bench   attention's backward pass at the same shapes, then the backward of
#   attn_bwd_compare torch's scaled_dot_product_attention backends
#   decode_bench     paged decoding attention (32 query heads on 8 KV heads, d 128, batches of 1
#   decode_compare   to 128), then torch's scaled_dot_product_attention and a Triton paged kernel
#   moe_bench        a whole MoE layer (Mixtral's experts at 4096 and 256 tokens, 64 small experts),
#   moe_compare      then torch eager and the layer composed from Triton kernels
# PARTS (default "gpu gemm triton shapes norm attn attn_bwd decode moe plan nccl cache") picks which to run.
set -uo pipefail

OUT=${OUT:-$PWD/gpu-logs}
root=/tmp/tessel
parts=${PARTS:-gpu gemm triton shapes norm attn attn_bwd decode moe plan nccl cache}
# Few tiles and a long K, small M, and shapes of no fixed configuration's choosing.
default_shapes=1024x1024x16384,128x8192x8192,32x8192x8192,1024x1024x1024,2048x2048x8192,4096x4096x512,3000x5000x712,896x4864x8192
shapes=${GEMM_SHAPES:-$default_shapes}
mkdir -p "$OUT"
inputs=/tmp/tessel-gemm-inputs  # the GEMM's tensors, shared by gemm_bench and the baselines
mkdir -p "$inputs"
gpus=$(nvidia-smi -L 2> /dev/null | wc -l)
rank_counts=(2)
(( gpus > 2 )) && rank_counts+=("$gpus")

bench() {
  local name=$1
  shift
  echo "== $name: $*"
  timeout --kill-after=30 "${TESSEL_BENCH_TIMEOUT:-300}" "$@" < /dev/null > "$OUT/$name.log" 2>&1
  echo "   exit $?"
  tail -n 30 "$OUT/$name.log" | sed 's/^/   /'
}

for part in $parts; do
  case $part in
    # Its JIT figures are cold compiles: tessel's disk cache and the driver's
    # (which keeps PTX compiled by an earlier run on this machine) stay out of them.
    gpu) TESSEL_CACHE_DIR= CUDA_CACHE_DISABLE=1 bench gpu_bench "$root/bin/gpu_bench" ;;
    # On the GEMM's own tensors when gemm ran first.
    triton)
      gemm_inputs=()
      compgen -G "$inputs/*.bin" > /dev/null && gemm_inputs=(--gemm-inputs "$inputs")
      bench triton python3 bench/triton_compare.py --json "$OUT/triton.json" "${gemm_inputs[@]}"
      ;;
    plan)
      for n in "${rank_counts[@]}"; do
        (( gpus >= n )) && bench "plan_bench_r$n" "$root/bin/plan_bench" --ranks="$n" --json="$OUT/plan_bench_r$n.json"
      done
      ;;
    nccl)
      for n in "${rank_counts[@]}"; do
        visible=$(seq -s, 0 $((n - 1)))
        (( gpus >= n )) && CUDA_VISIBLE_DEVICES=$visible bench "nccl_r$n" python3 bench/nccl_allgather.py --json "$OUT/nccl_r$n.json"
      done
      ;;
    cache) bench cache_bench "$root/bin/cache_bench" ;;
    gemm) bench gemm_bench "$root/bin/gemm_bench" --inputs="$inputs" ;;
    shapes)
      bench gemm_shapes "$root/bin/gemm_bench" --tune-shapes="$shapes"
      bench triton_shapes python3 bench/triton_compare.py --only matmul_shapes --tune-shapes "$shapes" \
        --json "$OUT/triton_shapes.json"
      ;;
    norm)
      bench norm_bench "$root/bin/norm_bench" --json="$OUT/norm_bench.json"
      # Triton compiles a sort of 8192 elements for a minute or more per warp count.
      TESSEL_BENCH_TIMEOUT=$(( ${TESSEL_BENCH_TIMEOUT:-300} * 2 )) bench norm_compare python3 bench/norm_compare.py --tessel "$OUT/norm_bench.json" --json "$OUT/norm_compare.json"
      ;;
    attn)
      bench attn_bench "$root/bin/attn_bench" --json="$OUT/attn_bench.json"
      bench attn_compare python3 bench/attn_compare.py --tessel "$OUT/attn_bench.json" --json "$OUT/attn_compare.json"
      ;;
    attn_bwd)
      bench attn_bwd_bench "$root/bin/attn_bwd_bench" --json="$OUT/attn_bwd_bench.json"
      bench attn_bwd_compare python3 bench/attn_bwd_compare.py --tessel "$OUT/attn_bwd_bench.json" \
        --json "$OUT/attn_bwd_compare.json"
      ;;
    decode)
      bench decode_bench "$root/bin/decode_bench" --json="$OUT/decode_bench.json"
      bench decode_compare python3 bench/decode_compare.py --tessel "$OUT/decode_bench.json" \
        --json "$OUT/decode_compare.json"
      ;;
    moe)
      bench moe_bench "$root/bin/moe_bench" --json="$OUT/moe_bench.json"
      bench moe_compare python3 bench/moe_compare.py --tessel "$OUT/moe_bench.json" --json "$OUT/moe_compare.json"
      ;;
    *) echo "gpu_bench.sh: unknown part '$part' (gpu, triton, shapes, plan, nccl, cache, gemm, norm, attn, attn_bwd, decode, moe)" >&2 ;;
  esac
done
