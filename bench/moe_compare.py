#!/usr/bin/env python3
"""The baselines of bench/moe_bench: a whole mixture-of-experts layer as tessel's users would otherwise run
it, on the same GPU and shapes (Mixtral's experts, 8 of them, top 2, H 4096, I 14336, at 4096 and 256
tokens, bf16 and fp8; 64 experts, top 6, H 2048, I 1408, at 4096 tokens, bf16):

  eager    torch as Mixtral's reference implementation writes the layer: the router, softmax and top k,
           then per expert its tokens' rows through its SwiGLU MLP, scaled and added into the output
  triton   the layer composed from Triton kernels as vLLM's fused MoE composes it: the router on cuBLAS,
           softmax and top k in torch, the choices grouped by expert in torch ops, the up projection and
           the down projection (router weights applied) in the MoE GEMM of bench/moe_common.py at the
           fastest of its configurations, SwiGLU in a Triton kernel, the sum of each token's choices in
           torch; in fp8 (e4m3 weights with a scale per expert, x and a quantized by static scales, as
           moe_bench's fp8 layer), x quantized in torch and a by the SwiGLU kernel (eager has no fp8 form)

Both take the router's probabilities as moe_bench's layer does (the softmax over all experts, its top k
unnormalized). Timed with triton.testing.do_bench (median, L2 flushed before each run), as moe_bench times
tessel. The Triton composition is checked against eager. With --tessel PATH (moe_bench's JSON from the same
run) it prints each baseline's time over tessel's (above 1: tessel is faster).

Usage: python3 bench/moe_compare.py [--tessel PATH] [--json PATH] [--only TEXT]
"""
import json

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

from attn_common import parse_args, print_case, write_json
from moe_common import MOE_CONFIGS, MOE_CONFIGS_FP8, moe_align_device, triton_moe_gemm

# (name, tokens, experts, top_k, H, I, fp8): moe_bench's cases.
CASES = [("mixtral, 4096 tokens", 4096, 8, 2, 4096, 14336, False),
         ("mixtral, 256 tokens", 256, 8, 2, 4096, 14336, False),
         ("mixtral fp8, 4096 tokens", 4096, 8, 2, 4096, 14336, True),
         ("mixtral fp8, 256 tokens", 256, 8, 2, 4096, 14336, True),
         ("64 experts, 4096 tokens", 4096, 64, 6, 2048, 1408, False)]
E4M3_MAX = 448.0


@triton.jit
def swiglu_kernel(h_ptr, a_ptr, scale_ptr, inter, BLOCK: tl.constexpr, QUANTIZE: tl.constexpr):
    # a [n, I] = silu(g) * u, where row i of h [n, 2I] is choice i's g then its u; quantized by the scale
    # (e4m3, saturated) where QUANTIZE.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = cols < inter
    g = tl.load(h_ptr + row * 2 * inter + cols, mask=inside, other=0.0).to(tl.float32)
    u = tl.load(h_ptr + row * 2 * inter + inter + cols, mask=inside, other=0.0).to(tl.float32)
    a = g * tl.sigmoid(g) * u
    if QUANTIZE:
        a = tl.clamp(a * (1.0 / tl.load(scale_ptr)), -448.0, 448.0)
    tl.store(a_ptr + row * inter + cols, a.to(a_ptr.dtype.element_ty), mask=inside)


def route(x, gate, top_k):
    """Each token's top_k experts and their probabilities (the softmax over all experts)."""
    probs = torch.softmax(torch.matmul(x, gate.T).float(), dim=-1)
    return torch.topk(probs, top_k, dim=-1)


def eager_layer(x, gate, w1, w2, top_k):
    weights, ids = route(x, gate, top_k)
    out = torch.zeros_like(x)
    inter = w2.shape[2]
    chosen = F.one_hot(ids, num_classes=w1.shape[0]).permute(2, 1, 0)  # [E, top_k, tokens]
    for e in range(w1.shape[0]):
        slot, token = torch.where(chosen[e])
        h = x[token] @ w1[e].T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2[e].T
        out.index_add_(0, token, y * weights[token, slot, None].to(x.dtype))
    return out


def triton_layer(x, gate, w1, w2, top_k, cfg, scales=None):
    """The layer; fp8 where `scales` (x's, w1's, a's and w2's, f32 tensors) are given."""
    tokens, hidden = x.shape
    inter = w2.shape[2]
    weights, ids = route(x, gate, top_k)
    n = tokens * top_k
    sorted_ids, block_experts = moe_align_device(ids.view(-1), w1.shape[0], cfg["BLOCK_M"])
    h = torch.empty(n, 2 * inter, device=x.device, dtype=x.dtype)
    xin = x
    if scales is not None:
        xin = (x.float() * (1 / scales[0])).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    triton_moe_gemm(xin, w1, h, sorted_ids, block_experts, top_k, cfg,
                    scales=None if scales is None else scales[:2])
    a = torch.empty(n, inter, device=x.device, dtype=x.dtype if scales is None else torch.float8_e4m3fn)
    swiglu_kernel[(n, triton.cdiv(inter, 1024))](h, a, h if scales is None else scales[2], inter, BLOCK=1024,
                                                 QUANTIZE=scales is not None)
    y = torch.empty(n, hidden, device=x.device, dtype=x.dtype)
    triton_moe_gemm(a, w2, y, sorted_ids, block_experts, 1, cfg, weights=weights.view(-1),
                    scales=None if scales is None else scales[2:])
    return y.view(tokens, top_k, hidden).sum(dim=1)


def inputs(tokens, experts, hidden, inter, fp8):
    """x, the router's gate and the experts' w1 [E, 2I, H] (gate rows, then up rows) and w2 [E, H, I], uniform
    at moe_bench's scales, and for fp8 (weights e4m3 in [-1, 1), those ranges their experts' scales) the scales
    of x, w1, a and w2; else None."""
    gen = torch.Generator(device="cuda").manual_seed(tokens + experts)

    def uniform(shape, scale, dtype=torch.bfloat16):
        return ((torch.rand(shape, device="cuda", generator=gen) * 2 - 1) * scale).to(dtype)

    w1_range, w2_range = 2 * (3 / hidden) ** 0.5, (3 / inter) ** 0.5
    x, gate = uniform((tokens, hidden), 1.0), uniform((experts, hidden), 0.2)
    if not fp8:
        return (x, gate, uniform((experts, 2 * inter, hidden), w1_range), uniform((experts, hidden, inter), w2_range),
                None)

    def full(value, count):
        return torch.full((count,), value, device="cuda", dtype=torch.float32)

    return (x, gate, uniform((experts, 2 * inter, hidden), 1.0, torch.float8_e4m3fn),
            uniform((experts, hidden, inter), 1.0, torch.float8_e4m3fn),
            (full(1 / 64, 1), full(w1_range, experts), full(1 / 32, 1), full(w2_range, experts)))


def tessel_cases(path):
    """moe_bench's cases by name, from its JSON at `path` (none without one)."""
    if not path:
        return {}
    with open(path) as f:
        return {case["name"]: case for case in json.load(f)["cases"]}


def main():
    args = parse_args("moe_bench")
    mine = tessel_cases(args.tessel)
    results = []
    for name, tokens, experts, top_k, hidden, inter, fp8 in CASES:
        if args.only not in name:
            continue
        x, gate, w1, w2, scales = inputs(tokens, experts, hidden, inter, fp8)
        flops = 2.0 * tokens * top_k * 3 * inter * hidden
        baselines = {}
        if fp8:  # checked against the bf16 layer on its dequantized weights
            reference = eager_layer(x, gate, (w1.float() * scales[1][:, None, None]).to(torch.bfloat16),
                                    (w2.float() * scales[3][:, None, None]).to(torch.bfloat16), top_k)
        else:
            reference = eager_layer(x, gate, w1, w2, top_k)
            baselines["eager"] = {"us": triton.testing.do_bench(lambda: eager_layer(x, gate, w1, w2, top_k),
                                                                return_mode="median") * 1e3}
        best = {}
        for cfg in MOE_CONFIGS_FP8 if fp8 else MOE_CONFIGS:
            label = "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} s{num_stages} w{num_warps}".format(**cfg)
            try:
                got = triton_layer(x, gate, w1, w2, top_k, cfg, scales)
                err = ((got.float() - reference.float()).norm() / reference.float().norm()).item()
                if err > (6e-2 if fp8 else 2e-2):
                    print(f"{name}: triton {label} differs from eager by {err:.3g}", flush=True)
                    continue
                us = triton.testing.do_bench(lambda: triton_layer(x, gate, w1, w2, top_k, cfg, scales),
                                             return_mode="median") * 1e3
                if us < best.get("us", float("inf")):
                    best = {"us": us, "config": label, "rel_err": err}
            except Exception as e:  # a configuration that does not run is left out, named
                print(f"{name}: triton {label}: {type(e).__name__}: {e}", flush=True)
        baselines["triton"] = best
        print_case(name, flops, mine.get(name), baselines)
        if fp8:  # tessel's layer with the tensor cores' sums over all of K, as Triton's runs
            fast = name.replace("fp8", "fp8 fast accumulation")
            print_case(fast, flops, mine.get(fast), baselines)
        results.append({"name": name, "tokens": tokens, "experts": experts, "top_k": top_k, "hidden": hidden,
                        "intermediate": inter, "fp8": fp8, **baselines})
        x = gate = w1 = w2 = scales = reference = None
        torch.cuda.empty_cache()
    write_json(args.json, torch.cuda.get_device_name(), results)


if __name__ == "__main__":
    main()
