#!/usr/bin/env python3
"""The baselines of bench/decode_bench: decoding attention as tessel's users would otherwise run it, on the
same GPU and shapes (Llama 3 8B's heads: 32 query heads on 8 KV heads, d 128, bf16; batches of 1 to 128
sequences of 1024 to 32768 keys):

  sdpa     torch.nn.functional.scaled_dot_product_attention over the same keys and values stored
           densely ([batch, 8, len, 128], enable_gqa): attention without a paged cache
  triton   a paged flash-decoding kernel in Triton (pages of 16 keys found through a block table, a KV
           head's query heads as the rows of one tile, the keys split across programs, then a kernel
           that combines the splits), at the fastest of its block sizes, warps, stages and split counts

Timed with triton.testing.do_bench (median, L2 flushed before each run), as decode_bench times tessel.
Each result is checked against a float64 reference on the first and last sequences. With --tessel PATH
(decode_bench's JSON from the same run) it prints each baseline's time over tessel's (above 1: tessel is
faster).

Usage: python3 bench/decode_compare.py [--tessel PATH] [--json PATH] [--only TEXT]
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

KV_HEADS, GROUP, D, PAGE = 8, 4, 128, 16
CASES = [(1, 8192), (1, 32768), (16, 4096), (16, 16384), (64, 2048), (128, 1024), (128, 4096)]
MAX_SPLITS = 64


@triton.jit
def _split(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_part, lse_part, max_pages, splits, chunk, log2_scale,
           KV_HEADS: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
           BN: tl.constexpr):
    pair, split = tl.program_id(0), tl.program_id(1)
    b, kvh = pair // KV_HEADS, pair % KV_HEADS
    g = tl.arange(0, ROWS)
    dims = tl.arange(0, D)
    head = pair * GROUP + g
    q = tl.load(q_ptr + head[:, None] * D + dims[None, :], mask=(g < GROUP)[:, None], other=0.0)
    length = tl.load(lens_ptr + b)
    start = split * chunk
    end = tl.minimum(length, start + chunk)
    m = tl.full([ROWS], -float("inf"), tl.float32)
    l = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, D], tl.float32)
    for j in range(start, end, BN):
        keys = j + tl.arange(0, BN)
        seen = keys < end
        page = tl.load(table_ptr + b * max_pages + keys // PAGE, mask=seen, other=0)
        rows = ((page.to(tl.int64) * PAGE + keys % PAGE) * KV_HEADS + kvh) * D
        kt = tl.load(k_ptr + rows[None, :] + dims[:, None], mask=seen[None, :], other=0.0)
        s = tl.dot(q, kt)
        s = tl.where(seen[None, :], s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.math.exp2(s * log2_scale - (m_new * log2_scale)[:, None])
        alpha = tl.math.exp2((m - m_new) * log2_scale)
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rows[:, None] + dims[None, :], mask=seen[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    live = l > 0
    out = acc / tl.where(live, l, 1.0)[:, None]
    part = head * splits + split
    tl.store(o_part + part[:, None] * D + dims[None, :], out, mask=(g < GROUP)[:, None])
    tl.store(lse_part + part, tl.where(live, m * log2_scale + tl.math.log2(l), -float("inf")), mask=g < GROUP)


@triton.jit
def _combine(o_part, lse_part, o_ptr, splits, D: tl.constexpr, SPLITS: tl.constexpr):
    head = tl.program_id(0)
    s = tl.arange(0, SPLITS)
    lse = tl.load(lse_part + head * splits + s, mask=s < splits, other=-float("inf"))
    top = tl.max(lse, 0)
    w = tl.where(lse == -float("inf"), 0.0, tl.math.exp2(lse - top))
    total = tl.sum(w, 0)
    dims = tl.arange(0, D)
    parts = tl.load(o_part + (head * splits + s)[:, None] * D + dims[None, :], mask=(s < splits)[:, None], other=0.0)
    o = tl.sum(parts * w[:, None], 0) / tl.where(total > 0, total, 1.0)
    tl.store(o_ptr + head * D + dims, o.to(o_ptr.dtype.element_ty))


def cdiv(a, b):
    return -(-a // b)


def decode_splits(batch, length, bn, programs):
    """decode_bench's (samples::decode_splits) choice."""
    blocks = max(1, cdiv(length, bn))
    return max(1, min(cdiv(programs, batch * KV_HEADS), blocks // 4, MAX_SPLITS))


def triton_decode(q, k_cache, v_cache, table, lens, max_pages, length, bn, warps, stages, splits):
    batch = q.shape[0]
    heads = KV_HEADS * GROUP
    chunk = cdiv(cdiv(max_pages * PAGE, splits), bn) * bn
    o_part = torch.empty((batch * heads * splits, D), device="cuda", dtype=torch.float32)
    lse_part = torch.empty((batch * heads * splits,), device="cuda", dtype=torch.float32)
    o = torch.empty_like(q)
    log2_scale = 1.0 / math.sqrt(D) * math.log2(math.e)

    def run():
        _split[(batch * KV_HEADS, splits)](q, k_cache, v_cache, table, lens, o_part, lse_part, max_pages, splits,
                                           chunk, log2_scale, KV_HEADS=KV_HEADS, GROUP=GROUP, ROWS=16, D=D,
                                           PAGE=PAGE, BN=bn, num_warps=warps, num_stages=stages)
        _combine[(batch * heads,)](o_part, lse_part, o, splits, D=D, SPLITS=triton.next_power_of_2(splits),
                                   num_warps=4)
    return run, o


def reference(q, k_dense, v_dense, b):
    """float64 attention of sequence b's query heads over its keys."""
    qb = q[b].double()                                      # [32, 128]
    kb = k_dense[b].double().repeat_interleave(GROUP, 0)    # [32, len, 128]
    vb = v_dense[b].double().repeat_interleave(GROUP, 0)
    s = torch.einsum("hd,hjd->hj", qb, kb) / math.sqrt(D)
    return torch.einsum("hj,hjd->hd", torch.softmax(s, -1), vb)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessel", help="decode_bench's JSON from the same run")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    args = parser.parse_args()
    mine = {}
    if args.tessel:
        with open(args.tessel) as f:
            mine = {(c["batch"], c["len"]): c for c in json.load(f)["cases"]}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = []
    for batch, length in CASES:
        name = f"batch {batch}, len {length}"
        if args.only not in name:
            continue
        gen = torch.Generator(device="cuda").manual_seed(batch * 100003 + length)
        max_pages = length // PAGE
        pages = batch * max_pages
        table = torch.randperm(pages, device="cuda", generator=gen).to(torch.int32).view(batch, max_pages)
        lens = torch.full((batch,), length, device="cuda", dtype=torch.int32)
        q = torch.rand((batch, KV_HEADS * GROUP, D), device="cuda", generator=gen).mul(2).sub(1).bfloat16()
        k_cache = torch.rand((pages, PAGE, KV_HEADS, D), device="cuda", generator=gen).mul(2).sub(1).bfloat16()
        v_cache = torch.rand((pages, PAGE, KV_HEADS, D), device="cuda", generator=gen).mul(2).sub(1).bfloat16()
        # The same keys and values, densely: [batch, 8, len, 128].
        k_dense = k_cache[table.long()].reshape(batch, length, KV_HEADS, D).transpose(1, 2).contiguous()
        v_dense = v_cache[table.long()].reshape(batch, length, KV_HEADS, D).transpose(1, 2).contiguous()
        want = {b: reference(q, k_dense, v_dense, b) for b in (0, batch - 1)}

        def error(o):
            return max((o[b].double() - w).abs().max().item() for b, w in want.items())

        moved = 2 * k_cache.numel() * 2 + 2 * q.numel() * 2
        base = {}
        q4 = q.view(batch, KV_HEADS * GROUP, 1, D)
        out = F.scaled_dot_product_attention(q4, k_dense, v_dense, enable_gqa=True)
        us = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q4, k_dense, v_dense, enable_gqa=True),
                                     return_mode="median") * 1e3
        base["sdpa"] = {"us": us, "error": error(out.view(batch, -1, D))}
        best = None
        for bn in (32, 64, 128):
            for warps in (4, 8):
                for stages in (2, 3, 4):
                    for more in (1, 2):
                        splits = min(MAX_SPLITS, more * decode_splits(batch, length, bn, 4 * sms))
                        try:
                            run, o = triton_decode(q, k_cache, v_cache, table, lens, max_pages, length, bn, warps,
                                                   stages, splits)
                            run()
                            us = triton.testing.do_bench(run, return_mode="median") * 1e3
                        except triton.runtime.errors.OutOfResources:
                            continue
                        if best is None or us < best["us"]:
                            best = {"us": us, "error": error(o),
                                    "config": f"bn{bn} w{warps} s{stages} {splits} splits"}
        base["triton"] = best
        line = f"{name:22s}"
        me = mine.get((batch, length))
        if me:
            line += f" tessel {me['us']:8.1f} us {moved / me['us'] / 1e3:6.0f} GB/s |"
        for label, r in base.items():
            line += f" {label} {r['us']:8.1f} us {moved / r['us'] / 1e3:6.0f} GB/s"
            if me:
                line += f" ({r['us'] / me['us']:.2f}x)"
            if "config" in r:
                line += f" [{r['config']}]"
            line += f" err {r['error']:.1e}"
        print(line, flush=True)
        results.append({"batch": batch, "len": length, **{k: v for k, v in base.items()}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
