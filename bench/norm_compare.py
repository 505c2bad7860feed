#!/usr/bin/env python3
"""The baselines of bench/norm_bench: row softmax, layer norm, RMS norm, prefix sums, linear recurrences
and sorts as tessel's users would otherwise run them, on the same GPU, shapes and dtypes (16384 x 1024
and 4096 x 8192, f32 and bf16):

  eager     torch.softmax, F.layer_norm, F.rms_norm, torch.cumsum, torch.sort (torch has no linear
            recurrence: none for it, nor a compiled one)
  compile   the same through torch.compile (Inductor's generated Triton kernels)
  triton    a Triton kernel per op in the style of Triton's tutorials (one row per program, the row
            in registers; the recurrence through tl.associative_scan over (decay, x) pairs), at the
            fastest of num_warps 1 to 16
  copy      dst.copy_(src) of the same matrix

rotary embeddings on queries of 4096 tokens of 32 heads of 128 and 16384 tokens of 16 heads of 64
(Hugging Face's x * cos + rotate_half(x) * sin eager and compiled, and a Triton kernel in the style of
Liger's, a program per token over its heads, each half loaded on its own, at its fastest num_warps),
and a mixture-of-experts router's top 8 of 64, 128 and 256 experts for 16384 tokens
(torch.topk of torch.softmax, eager and compiled; Triton's tl.topk gives no indices), and the token
permutation after it (vLLM's moe_align_block_size, blocks of 64) written in torch: bincount, a
stable argsort and scatters, eager and compiled, on choices skewed as norm_bench's are; and per-token
quantization to int8 and e4m3 at the norms' shapes (the scale a row's largest magnitude over 127 or 448,
eager and compiled, and a Triton kernel of a row per program).

Timed with triton.testing.do_bench (median, L2 flushed before each run), as norm_bench times tessel.
With --tessel PATH (norm_bench's JSON from the same run) it prints each baseline's time over tessel's
(above 1: tessel is faster) and tessel's bandwidth over the device copy's (norm_bench's own copy).

Usage: python3 bench/norm_compare.py [--tessel PATH] [--json PATH] [--only OP]
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

SHAPES = [(16384, 1024), (4096, 8192)]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
OPS = ["softmax", "layer_norm", "rms_norm", "cumsum", "recurrence", "sort"]
ROUTER = "router_top_k"
ROPE = "rope"
QUANTIZE = "quantize"
ROPE_SHAPES = [(4096, 32, 128), (16384, 16, 64)]
MOE = "moe_align"
MOE_BLOCK = 64
ROUTER_SHAPES = [(16384, 64), (16384, 128), (16384, 256)]
TOP_K = 8
EPS = 1e-5
WARPS = [1, 2, 4, 8, 16]


@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + c, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / cols + eps)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * cols + c, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_kernel(x_ptr, y_ptr, w_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * cols + c, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * cols + c, tl.cumsum(x, axis=0).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def affine_combine(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2


@triton.jit
def recurrence_kernel(x_ptr, y_ptr, w_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mask, other=1.0).to(tl.float32)
    _, h = tl.associative_scan((w, x), 0, affine_combine)
    tl.store(y_ptr + row * cols + c, h.to(y_ptr.dtype.element_ty), mask=mask)


def recurrence_reference(x, w):
    """y_j = w_j y_(j-1) + x_j along each row, step by step in double."""
    x64, w64 = x.double(), w.double()
    out = torch.empty_like(x64)
    h = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
    for j in range(x.shape[1]):
        h = w64[j] * h + x64[:, j]
        out[:, j] = h
    return out


@triton.jit
def sort_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=float("inf")).to(tl.float32)
    tl.store(y_ptr + row * cols + c, tl.sort(x, 0).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rope_kernel(x_ptr, y_ptr, cos_ptr, sin_ptr, heads, HEADS: tl.constexpr, HALF: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, HEADS)[:, None]
    c = tl.arange(0, HALF)[None, :]
    inside = h < heads
    cos = tl.load(cos_ptr + tok * 2 * HALF + c).to(tl.float32)
    sin = tl.load(sin_ptr + tok * 2 * HALF + c).to(tl.float32)
    at = tok * heads * 2 * HALF + h * 2 * HALF + c
    x1 = tl.load(x_ptr + at, mask=inside, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + at + HALF, mask=inside, other=0.0).to(tl.float32)
    tl.store(y_ptr + at, (x1 * cos - x2 * sin).to(y_ptr.dtype.element_ty), mask=inside)
    tl.store(y_ptr + at + HALF, (x2 * cos + x1 * sin).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def quantize_kernel(x_ptr, q_ptr, s_ptr, cols, LIMIT: tl.constexpr, INT: tl.constexpr, BLOCK: tl.constexpr):
    # One row per program: its scale (largest magnitude over LIMIT, 1 for zeros) and the row over it, rounded.
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.where(amax > 0, amax / LIMIT, 1.0)
    y = x / scale
    if INT:  # halfway cases away from zero, as torch.round's do not (it rounds them to even)
        y = tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))
    tl.store(q_ptr + row * cols + c, y.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


@triton.jit
def quantize_groups_kernel(x_ptr, q_ptr, s_ptr, rows, cols, LIMIT: tl.constexpr, GROUPS: tl.constexpr,
                           GROUP: tl.constexpr):
    # One row per program, its GROUPS groups of GROUP side by side; the scales stored [cols / GROUP, rows].
    row = tl.program_id(0)
    g = tl.arange(0, GROUPS)
    at = row * cols + g[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    x = tl.load(x_ptr + at).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.where(amax > 0, amax / LIMIT, 1.0)
    tl.store(q_ptr + at, (x / scale[:, None]).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g * rows + row, scale)


def quantize_eager(x, to, group=None):
    """x quantized per row, or per group of `group` of a row: q and the scales [rows, 1] (or [rows, groups])."""
    limit = 127.0 if to == torch.int8 else 448.0
    rows, cols = x.shape
    xf = x.float() if group is None else x.float().view(rows, cols // group, group)
    amax = xf.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax / limit, torch.ones_like(amax))
    y = xf / scale
    if to == torch.int8:
        y = torch.where(y >= 0, torch.floor(y + 0.5), torch.ceil(y - 0.5))
    return y.to(to).view(rows, cols), scale.view(rows, -1)


def measure_quantize():
    """Per-token quantization (samples::quantize_rows_kernel) to int8 and e4m3, and per 1 x 128 group
    (quantize_groups_kernel) to e4m3, at the norms' shapes: torch eager, torch.compile, and a Triton kernel
    of one row per program."""
    out = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for rows, cols in SHAPES:
        for dname, dtype in DTYPES.items():
            for tname, to, group in (("i8", torch.int8, None), ("f8e4m3", torch.float8_e4m3fn, None),
                                     ("f8e4m3", torch.float8_e4m3fn, 128)):
                x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
                q = torch.empty(rows, cols, device="cuda", dtype=to)
                scales = torch.empty(rows * (cols // group if group else 1), device="cuda", dtype=torch.float32)
                want = quantize_eager(x, to, group)[0].float()
                op = f"quantize_groups_{tname}" if group else f"quantize_{tname}"
                case = {"op": op, "dtype": dname, "rows": rows, "cols": cols}
                case["eager_us"] = bench_ms(lambda: quantize_eager(x, to, group)) * 1e3
                # Within one step of the eager result: a division rounded otherwise moves a value across a
                # rounding boundary now and then.
                atol, rtol = (1.0, 0.0) if to == torch.int8 else (2.0 ** -9, 0.125)
                try:
                    # Each case compiles afresh: one function compiled for every op, dtype and shape
                    # would pass dynamo's recompile limit.
                    torch._dynamo.reset()
                    fn = torch.compile(quantize_eager, fullgraph=True, dynamic=False)
                    torch.testing.assert_close(fn(x, to, group)[0].float(), want, atol=atol, rtol=rtol)
                    case["compile_us"] = bench_ms(lambda: fn(x, to, group)) * 1e3
                except Exception as e:
                    case["compile_error"] = f"{type(e).__name__}: {e}"[:300]
                if group:
                    time_triton(case, q, want, lambda warps: lambda: quantize_groups_kernel[(rows,)](
                        x, q, scales, rows, cols, LIMIT=448.0, GROUPS=cols // group, GROUP=group, num_warps=warps),
                        atol, rtol)
                else:
                    time_triton(case, q, want, lambda warps: lambda: quantize_kernel[(rows,)](
                        x, q, scales, cols, LIMIT=127.0 if to == torch.int8 else 448.0, INT=to == torch.int8,
                        BLOCK=triton.next_power_of_2(cols), num_warps=warps), atol, rtol)
                print(json.dumps(case), flush=True)
                out.append(case)
    return out


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def measure_rope():
    out = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for tokens, heads, dim in ROPE_SHAPES:
        for dname, dtype in DTYPES.items():
            x = torch.randn(tokens, heads, dim, device="cuda", generator=gen).to(dtype)
            angles = torch.rand(tokens, 1, dim // 2, device="cuda", generator=gen) * 100
            cos = torch.cat((angles.cos(), angles.cos()), dim=-1).to(dtype)  # the tables' halves are equal
            sin = torch.cat((angles.sin(), angles.sin()), dim=-1).to(dtype)
            y = torch.empty_like(x)
            want = rope(x.float(), cos.float(), sin.float())
            copy_ms = bench_ms(lambda: y.copy_(x))
            case = {"op": ROPE, "dtype": dname, "rows": tokens * heads, "cols": dim,
                    "torch_copy_gb_per_s": 2 * x.nbytes / (copy_ms * 1e-3) / 1e9}
            case["eager_us"] = bench_ms(lambda: rope(x, cos, sin)) * 1e3
            case["eager_max_abs_error"] = (rope(x, cos, sin).float() - want).abs().max().item()
            try:
                fn = torch.compile(rope, fullgraph=True, dynamic=False)
                torch.testing.assert_close(fn(x, cos, sin).float(), want, atol=2e-2, rtol=2e-2)
                case["compile_us"] = bench_ms(lambda: fn(x, cos, sin)) * 1e3
            except Exception as e:  # recorded, the other baselines still run
                case["compile_error"] = f"{type(e).__name__}: {e}"[:300]
            time_triton(case, y, want, lambda warps: lambda: rope_kernel[(tokens,)](
                x, y, cos, sin, heads, HEADS=triton.next_power_of_2(heads), HALF=dim // 2, num_warps=warps))
            print(json.dumps(case), flush=True)
            out.append(case)
    return out


def eager(op, x, w, b):
    if op == "sort":
        return lambda: torch.sort(x, dim=-1).values
    if op == "cumsum":
        return lambda: torch.cumsum(x, dim=-1)
    if op == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    if op == "layer_norm":
        return lambda: F.layer_norm(x, (x.shape[-1],), w, b, EPS)
    return lambda: F.rms_norm(x, (x.shape[-1],), w, EPS)


def compiled(op, x, w, b):
    if op == "sort":
        fn = torch.compile(lambda x: torch.sort(x, dim=-1).values, fullgraph=True, dynamic=False)
        return lambda: fn(x)
    if op == "cumsum":
        fn = torch.compile(lambda x: torch.cumsum(x, dim=-1), fullgraph=True, dynamic=False)
        return lambda: fn(x)
    if op == "softmax":
        fn = torch.compile(lambda x: torch.softmax(x, dim=-1), fullgraph=True, dynamic=False)
        return lambda: fn(x)
    if op == "layer_norm":
        fn = torch.compile(lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, EPS), fullgraph=True, dynamic=False)
        return lambda: fn(x, w, b)
    fn = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS), fullgraph=True, dynamic=False)
    return lambda: fn(x, w)


def triton_launch(op, x, y, w, b, warps):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    if op == "sort":
        return lambda: sort_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)
    if op == "cumsum":
        return lambda: cumsum_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)
    if op == "recurrence":
        return lambda: recurrence_kernel[(rows,)](x, y, w, cols, BLOCK=block, num_warps=warps)
    if op == "softmax":
        return lambda: softmax_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=warps)
    if op == "layer_norm":
        return lambda: layer_norm_kernel[(rows,)](x, y, w, b, cols, EPS, BLOCK=block, num_warps=warps)
    return lambda: rms_norm_kernel[(rows,)](x, y, w, cols, EPS, BLOCK=block, num_warps=warps)


def bench_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def time_triton(case, y, want, launcher, atol=2e-2, rtol=2e-2):
    """The Triton kernel launcher(warps) makes, at its fastest num_warps whose result (in y) is right."""
    best = None
    for warps in WARPS:
        launch = launcher(warps)
        launch()
        try:
            torch.testing.assert_close(y.float(), want, atol=atol, rtol=rtol)
        except AssertionError as e:  # a wrong result is not timed; the others still are
            case.setdefault("triton_wrong", {})[warps] = str(e).splitlines()[-3:]
            continue
        us = bench_ms(launch) * 1e3
        if best is None or us < best[0]:
            best = (us, warps)
    case["triton_us"], case["triton_warps"] = best if best else (math.nan, 0)


def measure(ops):
    out = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for rows, cols in SHAPES:
        for dname, dtype in DTYPES.items():
            x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
            w = (1 + 0.1 * torch.randn(cols, device="cuda", generator=gen)).to(dtype)
            b = (0.1 * torch.randn(cols, device="cuda", generator=gen)).to(dtype)
            y = torch.empty_like(x)
            copy_ms = bench_ms(lambda: y.copy_(x))
            for op in ops:
                # torch's bf16 cumsum keeps bf16 running sums: the reference sums in f32.
                if op == "cumsum":
                    want = torch.cumsum(x.float(), dim=-1)
                elif op == "recurrence":
                    want = recurrence_reference(x, w).float()
                else:
                    want = eager(op, x, w, b)().float()
                case = {"op": op, "dtype": dname, "rows": rows, "cols": cols,
                        "torch_copy_gb_per_s": 2 * x.nbytes / (copy_ms * 1e-3) / 1e9}
                if op != "recurrence":
                    case["eager_us"] = bench_ms(eager(op, x, w, b)) * 1e3
                    case["eager_max_abs_error"] = (eager(op, x, w, b)().float() - want).abs().max().item()
                    try:
                        fn = compiled(op, x, w, b)
                        torch.testing.assert_close(fn().float(), want, atol=2e-2, rtol=2e-2)
                        case["compile_us"] = bench_ms(fn) * 1e3
                    except Exception as e:  # recorded, the other baselines still run
                        case["compile_error"] = f"{type(e).__name__}: {e}"[:300]
                time_triton(case, y, want, lambda warps: triton_launch(op, x, y, w, b, warps))
                print(json.dumps(case), flush=True)
                out.append(case)
    return out


def router(x):
    return torch.topk(torch.softmax(x.float(), dim=-1), TOP_K, dim=-1)


def measure_router():
    out = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for rows, experts in ROUTER_SHAPES:
        for dname, dtype in DTYPES.items():
            x = torch.randn(rows, experts, device="cuda", generator=gen).to(dtype)
            case = {"op": ROUTER, "dtype": dname, "rows": rows, "cols": experts, "triton_us": math.nan}
            case["eager_us"] = bench_ms(lambda: router(x)) * 1e3
            want = router(x)
            try:
                fn = torch.compile(router, fullgraph=True, dynamic=False)
                got = fn(x)
                torch.testing.assert_close(got.values, want.values)
                torch.testing.assert_close(got.indices, want.indices)
                case["compile_us"] = bench_ms(lambda: fn(x)) * 1e3
            except Exception as e:  # recorded, the eager baseline still stands
                case["compile_error"] = f"{type(e).__name__}: {e}"[:300]
            print(json.dumps(case), flush=True)
            out.append(case)
    return out


def moe_align(ids, experts, block):
    """ids [n] grouped by expert, each group padded with n to a multiple of `block`: the padded order
    (capacity long, its tail past the total unwritten), each block's expert and the groups' offsets,
    as samples::MoeAlign gives them. The choices' order within a group is their own."""
    n = ids.numel()
    counts = torch.bincount(ids, minlength=experts)
    padded = (counts + block - 1) // block * block
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    order = torch.argsort(ids, stable=True)
    expert = ids[order]
    first = torch.cumsum(counts, 0) - counts
    dest = starts[expert] + torch.arange(n, device=ids.device) - first[expert]
    capacity = n + experts * (block - 1)
    out = torch.full((capacity,), n, dtype=torch.int32, device=ids.device)
    out[dest] = order.to(torch.int32)
    block_starts = torch.arange(0, capacity, block, device=ids.device)
    block_experts = torch.searchsorted(ends, block_starts, right=True).to(torch.int32)
    offsets = torch.cat([starts, ends[-1:]]).to(torch.int32)
    return out, block_experts, offsets


def measure_moe():
    out = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    n = ROUTER_SHAPES[0][0] * TOP_K
    for _, experts in ROUTER_SHAPES:
        anywhere = torch.randint(0, experts, (n,), device="cuda", generator=gen)
        hot = torch.randint(0, 8, (n,), device="cuda", generator=gen)
        spread = torch.randint(0, 4, (n,), device="cuda", generator=gen) == 0
        ids = torch.where(spread, anywhere, hot)
        case = {"op": MOE, "dtype": "i32", "rows": ROUTER_SHAPES[0][0], "cols": experts, "triton_us": math.nan}
        want = moe_align(ids, experts, MOE_BLOCK)
        total = int(want[2][-1])
        # The grouping by a stable sort in Python, to check the torch version itself.
        host_ids = ids.tolist()
        ref = sorted(range(n), key=host_ids.__getitem__)
        case["eager_ok"] = [v for v in want[0][:total].tolist() if v != n] == ref
        case["eager_us"] = bench_ms(lambda: moe_align(ids, experts, MOE_BLOCK)) * 1e3
        try:
            fn = torch.compile(lambda i: moe_align(i, experts, MOE_BLOCK), fullgraph=True, dynamic=False)
            got = fn(ids)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b)
            case["compile_us"] = bench_ms(lambda: fn(ids)) * 1e3
        except Exception as e:  # recorded, the eager baseline still stands
            case["compile_error"] = f"{type(e).__name__}: {e}"[:300]
        print(json.dumps(case), flush=True)
        out.append(case)
    return out


def report(cases, tessel):
    mine = {(c["op"], c["dtype"], c["rows"], c["cols"]): c for c in tessel.get("cases", [])}
    head = (f"{'kernel':<24}{'dtype':<6}{'shape':<12}{'tessel us':>10}{'eager':>9}{'compile':>9}{'triton':>9}"
            f"{'x eager':>9}{'x compile':>10}{'x triton':>9}{'x copy':>8}")
    print(head)
    for c in cases:
        t = mine.get((c["op"], c["dtype"], c["rows"], c["cols"]))
        us = t["us"] if t else math.nan

        def r(key):
            return c[key] / us if key in c and t else math.nan
        copy = t["gb_per_s"] / t["copy_gb_per_s"] if t and "copy_gb_per_s" in t else math.nan
        print(f"{c['op']:<24}{c['dtype']:<6}{c['rows']}x{c['cols']:<7}{us:>10.2f}{c.get('eager_us', math.nan):>9.2f}"
              f"{c.get('compile_us', math.nan):>9.2f}{c['triton_us']:>9.2f}{r('eager_us'):>9.3f}"
              f"{r('compile_us'):>10.3f}{r('triton_us'):>9.3f}{copy:>8.3f}")
    print("x eager/compile/triton: the baseline's time over tessel's (>= 1.0 is the target); "
          "x copy: tessel's GB/s over the device copy's (>= 0.85 is the target)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", help="norm_bench's JSON from the same run")
    ap.add_argument("--json", help="where to write the baselines' JSON")
    ap.add_argument("--only", choices=OPS + [ROPE, ROUTER, MOE, QUANTIZE], help="measure this op alone")
    args = ap.parse_args()
    print(f"norm_compare on {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    ops = [args.only] if args.only else OPS + [ROPE, ROUTER, MOE, QUANTIZE]
    cases = (measure([op for op in ops if op not in (ROPE, ROUTER, MOE, QUANTIZE)])
             + (measure_rope() if ROPE in ops else []) + (measure_router() if ROUTER in ops else [])
             + (measure_moe() if MOE in ops else []) + (measure_quantize() if QUANTIZE in ops else []))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "cases": cases}, f, indent=2)
    tessel = {}
    try:
        if args.tessel:
            with open(args.tessel) as f:
                tessel = json.load(f)
    except (OSError, ValueError) as e:
        print(f"norm_compare: no tessel figures ({e}); baselines only", flush=True)
    report(cases, tessel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
