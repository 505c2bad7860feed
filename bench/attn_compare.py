#!/usr/bin/env python3
"""The baselines of bench/attn_bench: attention forward as tessel's users would otherwise run it, on the
same GPU and shapes (4 x 32 heads, sequence lengths 1024, 4096 and 16384, head dimensions 64 and 128,
bf16, with and without the causal mask; grouped query heads, 32 on 8 KV heads at d 128, with
enable_gqa):

  sdpa-flash   torch.nn.functional.scaled_dot_product_attention on its flash-attention backend
  sdpa-cudnn   the same on cuDNN's backend
  sdpa-mem     the same on the memory-efficient backend
  triton       a flash-attention kernel in Triton (online softmax, the blocks every query sees first
               and unmasked, the rest masked), at the fastest of its block sizes, stages and warps

Timed with triton.testing.do_bench (median, L2 flushed before each run), as attn_bench times tessel.
Each result is checked against torch's math backend on a sample of heads. With --tessel PATH
(attn_bench's JSON from the same run) it prints each baseline's time over tessel's (above 1: tessel
is faster).

Usage: python3 bench/attn_compare.py [--tessel PATH] [--json PATH] [--only TEXT]
"""
import itertools
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_common import BATCH, HEADS, cases, parse_args, print_case, random_inputs, tessel_results, write_json
BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-mem": SDPBackend.EFFICIENT_ATTENTION,
}


@triton.jit
def _attend(acc, m, l, q, k_ptr, v_ptr, rows, lo, hi, length, log2_scale, D: tl.constexpr, BN: tl.constexpr,
            MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    dims = tl.arange(0, D)
    for start in range(lo, hi, BN):
        keys = start + tl.arange(0, BN)
        kt = tl.load(k_ptr + keys[None, :] * D + dims[:, None], mask=keys[None, :] < length, other=0.0)
        s = tl.dot(q, kt)
        if MASKED:
            seen = keys[None, :] < length
            if CAUSAL:
                seen = seen & (keys[None, :] <= rows[:, None])
            s = tl.where(seen, s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.math.exp2(s * log2_scale - (m_new * log2_scale)[:, None])
        alpha = tl.math.exp2((m - m_new) * log2_scale)
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + keys[:, None] * D + dims[None, :], mask=keys[:, None] < length, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    return acc, m, l


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, length, scale, D: tl.constexpr, BM: tl.constexpr,
                     BN: tl.constexpr, CAUSAL: tl.constexpr, GROUP: tl.constexpr):
    block = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    base = head * length * D
    kv_base = head // GROUP * length * D
    rows = block * BM + tl.arange(0, BM)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < length, other=0.0)
    m = tl.full([BM], -float("inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    log2_scale = scale * 1.4426950408889634
    if CAUSAL:
        full = block * BM // BN * BN
        end = tl.minimum((block + 1) * BM, length)
    else:
        full = length // BN * BN
        end = length
    acc, m, l = _attend(acc, m, l, q, k_ptr + kv_base, v_ptr + kv_base, rows, 0, full, length, log2_scale, D, BN,
                        False, CAUSAL)
    acc, m, l = _attend(acc, m, l, q, k_ptr + kv_base, v_ptr + kv_base, rows, full, end, length, log2_scale, D,
                        BN, True, CAUSAL)
    o = acc / l[:, None]
    tl.store(o_ptr + base + rows[:, None] * D + dims[None, :], o.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < length)


TRITON_CONFIGS = [(bm, bn, stages, warps) for bm, bn, stages, warps in
                  itertools.product([64, 128], [64, 128], [2, 3], [4, 8])]


def triton_attention(q, k, v, causal, config):
    bm, bn, stages, warps = config
    o = torch.empty_like(q)
    length, d = q.shape[-2], q.shape[-1]
    grid = (triton.cdiv(length, bm), q.shape[0] * q.shape[1])
    group = q.shape[1] // k.shape[1]

    def run():
        attention_kernel[grid](q, k, v, o, length, 1.0 / math.sqrt(d), D=d, BM=bm, BN=bn, CAUSAL=causal,
                               GROUP=group, num_stages=stages, num_warps=warps)
        return o
    return run


def time_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def error(got, want):
    """The largest absolute difference over heads 0, 65 and 127 (all rows)."""
    heads = [0, HEADS * BATCH // 2 + 1, HEADS * BATCH - 1]
    g = got.reshape(-1, *got.shape[-2:])[heads].float()
    w = want.reshape(-1, *want.shape[-2:])[heads].float()
    return (g - w).abs().max().item()


def main():
    args = parse_args("attn_bench")
    tessel = tessel_results(args.tessel)
    print(f"attn_compare on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    results = []
    for length, d, causal, group, name in cases(args.only):
        q, k, v = random_inputs(length, d, [HEADS, HEADS // group, HEADS // group])
        with sdpa_kernel(SDPBackend.MATH):
            heads = [0, HEADS * BATCH // 2 + 1, HEADS * BATCH - 1]
            kv_heads = [h // group for h in heads]  # flattened, as the heads of each batch divide by group
            flat = [t.reshape(-1, length, d)[at].float() for t, at in ((q, heads), (k, kv_heads), (v, kv_heads))]
            want = torch.zeros(BATCH * HEADS, length, d, device="cuda")
            want[heads] = F.scaled_dot_product_attention(*flat, is_causal=causal)
        flops = 4.0 * BATCH * HEADS * length * length * d * (0.5 if causal else 1.0)
        row = {"len": length, "d": d, "causal": causal, "group": group, "baselines": {}}
        for label, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
                    err = error(run(), want)
                    ms = time_ms(run)
            except RuntimeError as e:
                row["baselines"][label] = {"error": str(e).splitlines()[0][:120]}
                continue
            row["baselines"][label] = {"us": ms * 1e3, "max_error": err}
        best = None
        for config in TRITON_CONFIGS:
            try:
                run = triton_attention(q, k, v, causal, config)
                err = error(run(), want)
                if err > 2e-2:
                    continue
                ms = time_ms(run)
            except Exception:  # configurations that do not fit in shared memory or registers
                continue
            if best is None or ms < best[0]:
                best = (ms, config, err)
        if best is not None:
            bm, bn, stages, warps = best[1]
            row["baselines"]["triton"] = {"us": best[0] * 1e3, "max_error": best[2],
                                          "config": f"{bm}x{bn} s{stages} w{warps}"}
        print_case(name, flops, tessel.get((length, d, causal, group)), row["baselines"])
        results.append(row)
    write_json(args.json, torch.cuda.get_device_name(), results)


if __name__ == "__main__":
    main()
