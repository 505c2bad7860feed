#!/usr/bin/env python3
"""What tessel users would otherwise pick, measured on one GPU (DESIGN.md, "Performance targets").

  launch_descriptors   host µs per Triton launch: 3 host TensorDescriptors vs 3 plain pointers
  cold_compile_matmul  Triton's cold compile of its TMA persistent matmul (fresh cache, in a subprocess)
  fused_epilogue       cuBLAS's bias + GELU epilogue (torch._addmm_activation) vs its plain GEMM, bf16
  matmul_tflops        Triton TMA persistent matmul (best of MM_CONFIGS) vs torch.matmul (cuBLAS), bf16 and f16
                       in and out; fp8 e4m3 in, bf16 out vs torch._scaled_mm (per-tensor scales of 1,
                       use_fast_accum=True, and False: sums promoted to f32) and the same Triton kernel at
                       MM_CONFIGS_FP8; on
                       bench/gemm_bench's tensors with --gemm-inputs DIR
  matmul_blockwise     fp8 e4m3 with DeepSeek-V3's block scales (1 x 128 for A, 128 x 128 for B), C bf16: Triton's
                       persistent matmul scaling each K step (best of MM_CONFIGS_BLOCKWISE) vs cuBLAS's blockwise
                       GEMM through PyTorch where it runs, on gemm_bench's tensors
  matmul_shapes        the same for bf16 at the shapes of --tune-shapes (bench/gemm_bench's autotuned shapes)
  matmul_pointer       Triton's matmul in its tutorial's form (operands through pointers, tl.load in the K
                       loop, pipelined by num_stages; best of PTR_CONFIGS) vs cuBLAS, bf16, on gemm_bench's
                       tensors: the baseline of gemm_bench's pointer GEMM
  moe_gemm             a mixture of experts' GEMM over router choices grouped by expert (MOE_SHAPES, bf16 and
                       fp8 e4m3 with per-tensor scales): a Triton kernel of samples::moe_gemm_kernel's form (best
                       of MOE_CONFIGS / MOE_CONFIGS_FP8), torch eager (a matmul per expert; bf16) and cuBLAS on a
                       dense GEMM of the same size (no gathering; torch._scaled_mm for fp8)
  copy_bandwidth       dst.copy_(src) on 1 GiB of bf16, GB/s counting bytes read + written
  elementwise_bandwidth torch.add on 64 Mi f32, GB/s (row kernels: bench/norm_compare.py)

Usage: python3 bench/triton_compare.py [--json PATH] [--only NAME,...] [--launches N] [--cold-runs N]
                                      [--gemm-inputs DIR] [--tune-shapes MxNxK,...]
The JSON goes to --json, else $OUT/triton.json when $OUT is set, else ./triton.json; it is rewritten
after every measurement. A failed measurement records its error string and the others still run.
"""
import argparse
import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

# The cold-compile child must point Triton at an empty cache before triton is imported.
if "--child" in sys.argv:
    if "--cache-dir" in sys.argv:  # reuse a filled cache: measures a disk-cache hit instead
        os.environ["TRITON_CACHE_DIR"] = sys.argv[sys.argv.index("--cache-dir") + 1]
    else:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import triton.testing  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from moe_common import MOE_CONFIGS, MOE_CONFIGS_FP8, moe_align, moe_eager, triton_moe_gemm  # noqa: E402

CHILD_MARK = "@@TRITON_COMPARE_RESULT@@ "
MM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024)]
MM_DTYPES = [torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.int8]
COLD_SHAPE = (4096, 4096, 4096)
MM_CFG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8)
# The configurations matmul_tflops tries; Triton is reported at its best.
MM_CONFIGS = [MM_CFG,
              dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=8),
              dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8)]
# fp8 and int8 boxes: rows of 128 bytes as for 16-bit types, so BLOCK_K 128.
MM_CONFIGS_FP8 = [dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_stages=3, num_warps=8),
                  dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_stages=4, num_warps=8),
                  dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_stages=4, num_warps=8)]
# Blockwise fp8: each K step's product added in f32 beside the running sum, so two accumulators.
MM_CONFIGS_BLOCKWISE = [dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_stages=3, num_warps=8),
                        dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_stages=4, num_warps=8),
                        dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_stages=3, num_warps=8),
                        dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_stages=4, num_warps=4)]
# int8: C's int32 staging tile is twice a bf16 one, so 128 x 256 tiles fit two stages only.
MM_CONFIGS_INT8 = [dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_stages=4, num_warps=8),
                   dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_stages=5, num_warps=8),
                   dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_stages=2, num_warps=8),
                   dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_stages=3, num_warps=8)]
LAUNCH_BLOCK = [64, 64]
# The tutorial-form kernel's configurations (its autotuner's Hopper picks among them).
PTR_CONFIGS = [dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8),
               dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=8),
               dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=4),
               dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=4),
               dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=4)]

# (tokens, top_k, experts, N, K): Mixtral's up projection, and a layer of 64 small experts.
MOE_SHAPES = [(4096, 2, 8, 14336, 4096), (4096, 6, 64, 2816, 2048)]


# ---------------------------------------------------------------------------- kernels

@triton.jit
def desc3_kernel(a_desc, b_desc, c_desc):
    c_desc.store([0, 0], a_desc.load([0, 0]) + b_desc.load([0, 0]))


@triton.jit
def ptr3_kernel(a_ptr, b_ptr, c_ptr):
    offs = tl.arange(0, 64)
    tl.store(c_ptr + offs, tl.load(a_ptr + offs) + tl.load(b_ptr + offs))


@triton.jit
def _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_M):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


# Tutorial 09's "TMA persistent" kernel with host-side TensorDescriptors, without autotuning.
@triton.jit
def matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                 GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, ACC_INT: tl.constexpr = False,
                                 sa_ptr=None, sb_ptr=None, ROWWISE: tl.constexpr = False,
                                 BLOCKWISE: tl.constexpr = False):
    # ACC_INT: int8 operands summed in int32 (C int32, as torch._int_mm's), else f32. ROWWISE: C's rows
    # scaled by sa [M] and its columns by sb [N] in f32 before C's dtype (fp8 and int8 rowwise scaling).
    # BLOCKWISE (BLOCK_K 128): each K step's product scaled by sa [K / 128, M] at its rows and sb
    # [N / 128, K / 128] at its columns' block (DeepSeek-V3's 1 x 128 and 128 x 128 scales).
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    # The epilogue keeps its own tile counter, as the tutorial does, so the flattened
    # loop's prologue and epilogue share no value.
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        if ACC_INT:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            if BLOCKWISE:
                rows = offs_am + tl.arange(0, BLOCK_M)
                cols = offs_bn + tl.arange(0, BLOCK_N)
                sa = tl.load(sa_ptr + ki * M + rows, mask=rows < M, other=0.0)
                sb = tl.load(sb_ptr + (cols // 128) * k_tiles + ki, mask=cols < N, other=0.0)
                acc += tl.dot(a, b.T) * sa[:, None] * sb[None, :]
            else:
                acc = tl.dot(a, b.T, acc, out_dtype=acc.dtype)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        if ROWWISE:
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            sa = tl.load(sa_ptr + rows, mask=rows < M, other=0.0)
            sb = tl.load(sb_ptr + cols, mask=cols < N, other=0.0)
            out = acc.to(tl.float32) * sa[:, None] * sb[None, :]
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], out.to(c_desc.dtype))
        else:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def matmul_pointer_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # One program per C tile in the grouped order; A (M, K) and B (N, K) row-major, read through pointers
    # with masks at the edges, as samples::pointer_gemm_kernel reads them.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    per_group = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = pid // per_group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    rows = (first_m + pid % per_group % group_rows) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % per_group // group_rows) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kin = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * K + kin[None, :], mask=(rows[:, None] < M) & (kin[None, :] < K), other=0.0)
        bt = tl.load(b_ptr + cols[None, :] * K + kin[:, None], mask=(kin[:, None] < K) & (cols[None, :] < N),
                     other=0.0)
        acc = tl.dot(a, bt, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def triton_pointer_matmul(a, b, c, cfg):
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    matmul_pointer_kernel[grid](a, b, c, M, N, K, **cfg)
    return c


@functools.lru_cache(maxsize=None)
def num_sms():
    return torch.cuda.get_device_properties(0).multi_processor_count


def triton_matmul(a, b, c, cfg=MM_CFG, row_scales=None, col_scales=None, blockwise=False):
    """c = a @ b.T; a (M, K), b (N, K), c (M, N), row-major bf16 (the tutorial's layout); with row_scales
    and col_scales, scaled per row and column, or with `blockwise` per block (the kernel's BLOCKWISE).
    Descriptors are built on every call, as the tutorial's wrapper does."""
    M, K = a.shape
    N = b.shape[0]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    a_desc = TensorDescriptor.from_tensor(a, block_shape=[bm, bk])
    b_desc = TensorDescriptor.from_tensor(b, block_shape=[bn, bk])
    c_desc = TensorDescriptor.from_tensor(c, block_shape=[bm, bn])
    grid = (min(num_sms(), triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    rowwise = row_scales is not None and not blockwise
    matmul_tma_persistent_kernel[grid](a_desc, b_desc, c_desc, M, N, K, NUM_SMS=num_sms(),
                                       ACC_INT=a.dtype == torch.int8, sa_ptr=row_scales, sb_ptr=col_scales,
                                       ROWWISE=rowwise, BLOCKWISE=blockwise, **cfg)
    return c


# ---------------------------------------------------------------------------- helpers

def _err(e):
    traceback.print_exc(file=sys.stderr)
    return f"{type(e).__name__}: {e}"[:2000]


def _alloc(size, alignment, stream):
    # Scratch for on-device descriptors (unused by host descriptors; some versions still ask).
    return torch.empty(size, device="cuda", dtype=torch.int8)


def _bench_ms(fn):  # median of CUDA-event timings, L2 flushed before each run
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def _rel_err(x, ref):  # relative Frobenius error
    return ((x.float() - ref.float()).norm() / ref.float().norm()).item()


def _free():
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception as e:  # a sticky CUDA error: the measurement that caused it already reports it
        print(f"cleanup failed: {e}", file=sys.stderr, flush=True)


def _clean(x):
    """NaN/inf are not JSON: write them as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _host_us_per_launch(launch, n, sync_each=False):
    for _ in range(100):  # the first call compiles
        launch()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
        if sync_each:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


# ---------------------------------------------------------------------------- measurements

def launch_descriptors(args):
    n = args.launches
    x, y, z = (torch.randn(256, 256, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    descs = [TensorDescriptor.from_tensor(t, block_shape=LAUNCH_BLOCK) for t in (x, y, z)]
    res = {"launches": n, "tensor_shape": [256, 256], "block_shape": LAUNCH_BLOCK}

    def rebuilt():
        d = [TensorDescriptor.from_tensor(t, block_shape=LAUNCH_BLOCK) for t in (x, y, z)]
        desc3_kernel[(1,)](*d)

    cases = [
        ("desc3_us", lambda: desc3_kernel[(1,)](*descs), n, False),
        ("desc3_rebuilt_us", rebuilt, n, False),  # descriptors made per call, as wrappers do
        ("ptr3_us", lambda: ptr3_kernel[(1,)](x, y, z), n, False),
        ("desc3_sync_us", lambda: desc3_kernel[(1,)](*descs), max(1, n // 10), True),
        ("ptr3_sync_us", lambda: ptr3_kernel[(1,)](x, y, z), max(1, n // 10), True),
    ]
    for name, launch, count, sync_each in cases:
        try:
            res[name] = _host_us_per_launch(launch, count, sync_each)
        except Exception as e:
            res[name + "_error"] = _err(e)
    try:
        z.zero_()
        desc3_kernel[(1,)](*descs)
        res["desc3_result_ok"] = bool(torch.equal(z[:64, :64], x[:64, :64] + y[:64, :64]))
    except Exception as e:
        res["desc3_result_error"] = _err(e)
    if "desc3_us" in res and "ptr3_us" in res:
        res["desc3_over_ptr3"] = res["desc3_us"] / res["ptr3_us"]
    return res


def child_cold_compile():
    """Runs in a fresh process whose TRITON_CACHE_DIR was set before triton was imported."""
    cache_dir = os.environ["TRITON_CACHE_DIR"]
    out = {"cache_dir": cache_dir}
    try:
        M, N, K = COLD_SHAPE
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()  # CUDA context and inputs exist before the clock starts
        out["cache_files_before"] = sum(len(f) for _, _, f in os.walk(cache_dir))
        try:  # Triton's own CUDA helper module, built once per cache: kept out of the compile time
            t0 = time.perf_counter()
            triton.runtime.driver.active.utils
            out["driver_init_s"] = time.perf_counter() - t0
        except Exception as e:
            out["driver_init_error"] = _err(e)

        t0 = time.perf_counter()
        triton_matmul(a, b, c)
        torch.cuda.synchronize()
        out["first_call_s"] = time.perf_counter() - t0

        warm, host = [], []  # per call: until synchronize returns, and the host's share alone
        for _ in range(20):
            t0 = time.perf_counter()
            triton_matmul(a, b, c)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            warm.append(time.perf_counter() - t0)
            host.append(t1 - t0)
        out["warm_call_ms"] = statistics.median(warm) * 1e3
        out["warm_launch_host_us"] = statistics.median(host) * 1e6
        out["first_minus_warm_s"] = out["first_call_s"] - statistics.median(warm)
        out["cache_files_after"] = sum(len(f) for _, _, f in os.walk(cache_dir))
        out["rel_err_vs_cublas"] = _rel_err(c, torch.matmul(a, b.T))
        # The rest of MM_CONFIGS, each compiled on its first call as Triton's autotuner compiles its
        # configurations: what tuning over all of them costs in compiles (the first one's above).
        configs_cold = [out["first_minus_warm_s"]]
        for cfg in MM_CONFIGS[1:]:
            t0 = time.perf_counter()
            triton_matmul(a, b, c, cfg)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            triton_matmul(a, b, c, cfg)
            torch.cuda.synchronize()
            configs_cold.append(first - (time.perf_counter() - t0))
        out["configs_cold_s"] = configs_cold
        out["configs_cold_total_s"] = sum(configs_cold)
    except Exception as e:
        out["error"] = _err(e)
    print(CHILD_MARK + json.dumps(_clean(out)), flush=True)


def _run_child(args, extra=()):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "cold_compile", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(CHILD_MARK):
            return json.loads(line[len(CHILD_MARK):])
    raise RuntimeError(f"child exited {p.returncode} without a result; stderr: {p.stderr[-1500:]}")


def cold_compile_matmul(args):
    res = {"shape": list(COLD_SHAPE), "config": MM_CFG, "runs": []}
    dirs = []
    try:
        for i in range(args.cold_runs):
            try:
                r = _run_child(args)
            except Exception as e:
                r = {"error": _err(e)}
            if r.get("cache_dir"):
                dirs.append(r["cache_dir"])
            if "first_minus_warm_s" in r:
                r["cold_s"] = r.pop("first_minus_warm_s")
            res["runs"].append(r)
            print(f"  cold run {i + 1}/{args.cold_runs}: "
                  + (f"{r['cold_s']:.3f} s" if "cold_s" in r else r.get("error", "?")), flush=True)
        ok = [r for r in res["runs"] if "cold_s" in r]
        if ok:
            for key in ("cold_s", "warm_call_ms", "warm_launch_host_us", "driver_init_s", "configs_cold_total_s"):
                vals = [r[key] for r in ok if key in r]
                if vals:
                    res[key + "_median"] = statistics.median(vals)
            res["cold_s_min"] = min(r["cold_s"] for r in ok)
        else:
            res["error"] = "no cold run succeeded; first: " + str(res["runs"][0].get("error") if res["runs"] else None)
        if dirs:  # a new process whose cache already holds the kernel: Triton's disk-cache hit
            try:
                r = _run_child(args, ("--cache-dir", dirs[-1]))
                if "first_minus_warm_s" in r:
                    r["load_s"] = r.pop("first_minus_warm_s")
                res["disk_cache_hit"] = r
            except Exception as e:
                res["disk_cache_hit"] = {"error": _err(e)}
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    return res


def _gemm_inputs(args, M, N, K, dtype):
    """A (M, K) and B (N, K): bench/gemm_bench's tensors where --gemm-inputs names where it left them."""
    name = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float8_e4m3fn: "f8e4m3", torch.int8: "i8"}[dtype]
    bits_type = torch.int8 if dtype in (torch.float8_e4m3fn, torch.int8) else torch.int16
    if args.gemm_inputs:
        def read(which, rows, cols):
            path = os.path.join(args.gemm_inputs, f"{which}_{M}x{N}x{K}_{name}.bin")
            bits = torch.from_file(path, size=rows * cols, dtype=bits_type)
            return bits.view(dtype).reshape(rows, cols).cuda()
        return read("a", M, K), read("b", N, K), "gemm_bench"
    def rand(rows, cols):
        if dtype == torch.int8:
            return torch.randint(-128, 128, (rows, cols), device="cuda", dtype=torch.int8)
        return torch.randn(rows, cols, device="cuda").to(dtype)
    return rand(M, K), rand(N, K), "randint" if dtype == torch.int8 else "randn"


def _shapes(text):
    """"MxNxK,..." as a list of (M, N, K)."""
    try:
        shapes = [tuple(int(x) for x in item.split("x")) for item in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 3 or min(s) <= 0 for s in shapes):
        raise argparse.ArgumentTypeError(f"want MxNxK,... with positive sizes, got {text!r}")
    return shapes


def _add_row(rows, row):
    """Keeps a shape's row and prints it as it is measured."""
    rows.append(row)
    print(f"  {row['M']}x{row['N']}x{row['K']}: " + ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if k not in ("M", "N", "K")),
        flush=True)


def _best_config(row, configs, c, reference, flop, launch):
    """Times launch(cfg), which writes c, for each of `configs`: each one's TFLOP/s goes into `row`, and
    the fastest whose c is within 1e-2 of `reference` into triton_ms, triton_tflops, triton_config and
    rel_err; ok says whether one was."""
    for cfg in configs:
        name = "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} s{num_stages} w{num_warps}".format(**cfg)
        try:
            c.fill_(float("nan"))
            launch(cfg)
            err = _rel_err(c, reference)
            ms = _bench_ms(lambda: launch(cfg))
            row["triton " + name + " tflops"] = flop / ms / 1e9
            if err < 1e-2 and ms < row.get("triton_ms", float("inf")):
                row["triton_ms"], row["triton_tflops"], row["triton_config"] = ms, flop / ms / 1e9, name
                row["rel_err"] = err
        except Exception as e:
            row["triton " + name + " error"] = _err(e)
    row["ok"] = "triton_tflops" in row


def _matmul_row(args, M, N, K, dtype, inputs=None):
    """cuBLAS and Triton (at its best config) on A (M, K) @ B (N, K).T: one row of the table."""
    row = {"M": M, "N": N, "K": K, "dtype": str(dtype).replace("torch.", "")}
    fp8 = dtype == torch.float8_e4m3fn
    int8 = dtype == torch.int8
    try:
        a, b, row["inputs"] = inputs() if inputs else _gemm_inputs(args, M, N, K, dtype)
        if int8:
            c = torch.full((M, N), -1, device="cuda", dtype=torch.int32)
        else:
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16 if fp8 else dtype)
        if int8:  # cuBLAS's int8 GEMM: B column-major (b.T of the N x K tensor), the exact int32 sums
            baseline = lambda: torch._int_mm(a, b.T)
            reference = baseline()
        elif fp8:  # cuBLAS's fp8 GEMM: B column-major (b.T of the N x K tensor), bf16 out
            one = torch.ones((), device="cuda", dtype=torch.float32)
            baseline = lambda: torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                use_fast_accum=True)
            reference = torch.matmul(a.float(), b.float().T)
        else:
            baseline = lambda: torch.matmul(a, b.T)
            reference = baseline()
        configs = MM_CONFIGS_INT8 if int8 else MM_CONFIGS_FP8 if fp8 else MM_CONFIGS
        triton_matmul(a, b, c, configs[0])
        row["rel_err"] = _rel_err(c, reference)  # Triton's, against cuBLAS's result (fp8: the f32 product)
        row["ok"] = row["rel_err"] == 0 if int8 else row["rel_err"] < 1e-2  # False for NaN too
        if fp8:
            # Against the f32 product: fp8 tensor-core sums lose bits as K grows (cuBLAS's too).
            row["cublas_rel_err"] = _rel_err(baseline(), reference)
            row["ok"] = row["rel_err"] <= max(1e-2, 1.5 * row["cublas_rel_err"])
        flop = 2.0 * M * N * K
        try:
            ms = _bench_ms(baseline)
            row["cublas_ms"] = ms
            row["cublas_tflops"] = flop / ms / 1e9
        except Exception as e:
            row["cublas_error"] = _err(e)
        if fp8:  # cuBLAS without fast accumulation: its sums promoted to f32, as tessel's fp8 GEMM by default
            try:
                exact = lambda: torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                 use_fast_accum=False)
                row["cublas_f32_sums_rel_err"] = _rel_err(exact(), reference)
                ms = _bench_ms(exact)
                row["cublas_f32_sums_ms"], row["cublas_f32_sums_tflops"] = ms, flop / ms / 1e9
            except Exception as e:
                row["cublas_f32_sums_error"] = _err(e)
        for cfg in configs:
            name = "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} s{num_stages} w{num_warps}".format(**cfg)
            try:
                ms = _bench_ms(lambda: triton_matmul(a, b, c, cfg))
                row["triton " + name + " tflops"] = flop / ms / 1e9
                if ms < row.get("triton_ms", float("inf")):
                    row["triton_ms"], row["triton_tflops"], row["triton_config"] = ms, flop / ms / 1e9, name
            except Exception as e:
                row["triton " + name + " error"] = _err(e)
        if "triton_tflops" in row and "cublas_tflops" in row:
            row["triton_over_cublas"] = row["triton_tflops"] / row["cublas_tflops"]
    except Exception as e:
        row["error"] = _err(e)
    finally:
        a = b = c = None
        _free()
    return row


def matmul_tflops(args):
    rows = []
    for (M, N, K), dtype in [(shape, t) for t in MM_DTYPES for shape in MM_SHAPES]:
        _add_row(rows, _matmul_row(args, M, N, K, dtype))
    return {"configs": MM_CONFIGS, "layout": "C = A @ B.T, A (M,K), B (N,K) row-major, C in the inputs' dtype (fp8: bf16, int8: int32)",
            "shapes": rows}


def matmul_rowwise(args):
    """fp8 e4m3 and int8 GEMMs scaled per row of A and per column of C (per-token and per-channel scales, all
    ones here), C bf16, on bench/gemm_bench's tensors: cuBLAS's rowwise fp8 GEMM (torch._scaled_mm with
    scale_a (M, 1), scale_b (1, N), fast accumulation); for int8 torch._int_mm followed by the scaling in
    torch (PyTorch has no fused rowwise int8 GEMM); and Triton's persistent matmul with the scaling in its
    epilogue, at its best of MM_CONFIGS_FP8."""
    rows = []
    for (M, N, K), dtype in [(shape, t) for t in (torch.float8_e4m3fn, torch.int8) for shape in MM_SHAPES]:
        row = {"M": M, "N": N, "K": K, "dtype": str(dtype).replace("torch.", "")}
        try:
            a, b, row["inputs"] = _gemm_inputs(args, M, N, K, dtype)
            sa = torch.ones(M, device="cuda", dtype=torch.float32)
            sb = torch.ones(N, device="cuda", dtype=torch.float32)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            if dtype == torch.int8:
                baseline = lambda: (torch._int_mm(a, b.T).float() * sa[:, None] * sb[None, :]).to(torch.bfloat16)
                row["baseline"] = "torch._int_mm, then the scaling"
            else:
                baseline = lambda: torch._scaled_mm(a, b.T, scale_a=sa[:, None], scale_b=sb[None, :],
                                                    out_dtype=torch.bfloat16, use_fast_accum=True)
                row["baseline"] = "torch._scaled_mm rowwise"
            reference = baseline()
            triton_matmul(a, b, c, MM_CONFIGS_FP8[0], sa, sb)
            row["rel_err"] = _rel_err(c, reference)
            row["ok"] = row["rel_err"] < 1e-2
            flop = 2.0 * M * N * K
            ms = _bench_ms(baseline)
            row["baseline_ms"], row["baseline_tflops"] = ms, flop / ms / 1e9
            for cfg in MM_CONFIGS_FP8:
                name = "{BLOCK_M}x{BLOCK_N}x{BLOCK_K} s{num_stages} w{num_warps}".format(**cfg)
                try:
                    ms = _bench_ms(lambda: triton_matmul(a, b, c, cfg, sa, sb))
                    row["triton " + name + " tflops"] = flop / ms / 1e9
                    if ms < row.get("triton_ms", float("inf")):
                        row["triton_ms"], row["triton_tflops"], row["triton_config"] = ms, flop / ms / 1e9, name
                except Exception as e:
                    row["triton " + name + " error"] = _err(e)
        except Exception as e:
            row["error"] = _err(e)
        finally:
            a = b = c = sa = sb = reference = None
            _free()
        _add_row(rows, row)
    return {"configs": MM_CONFIGS_FP8, "layout": "C = diag(sa) (A @ B.T) diag(sb), A (M,K), B (N,K), C bf16",
            "shapes": rows}


def _blockwise_scaled_mm(a, b, sa, sb):
    """cuBLAS's blockwise fp8 GEMM through PyTorch: torch._scaled_mm with scale_a (M, K / 128) of strides
    (1, M) and scale_b the transpose of sb (N / 128, K / 128), C bf16; where this PyTorch refuses the
    form on this GPU, torch.nn.functional.scaled_mm with BlockWise1x128 and BlockWise128x128 recipes."""
    try:
        return torch._scaled_mm(a, b.T, scale_a=sa.T, scale_b=sb.T, out_dtype=torch.bfloat16), "torch._scaled_mm"
    except Exception as first:
        try:
            from torch.nn.functional import ScalingType, scaled_mm
            out = scaled_mm(a, b.T, sa.T, ScalingType.BlockWise1x128, sb.T, ScalingType.BlockWise128x128,
                            output_dtype=torch.bfloat16)
            return out, "torch.nn.functional.scaled_mm"
        except Exception as second:
            raise RuntimeError(f"torch._scaled_mm: {first}; torch.nn.functional.scaled_mm: {second}") from second


def matmul_blockwise(args):
    """fp8 e4m3 GEMMs with DeepSeek-V3's block scales (A's per row and 128 of K, B's per 128 x 128 block;
    samples::GemmConfig::block_scales), C bf16, on bench/gemm_bench's tensors, the scales random powers of
    two: cuBLAS's blockwise GEMM through PyTorch where it runs on this GPU, and Triton's persistent matmul
    scaling each K step's product in its loop, at its best of MM_CONFIGS_BLOCKWISE; both checked against
    the f32 product of the scaled operands."""
    rows = []
    for M, N, K in MM_SHAPES:
        row = {"M": M, "N": N, "K": K, "dtype": "float8_e4m3fn"}
        try:
            a, b, row["inputs"] = _gemm_inputs(args, M, N, K, torch.float8_e4m3fn)
            kb, nb = triton.cdiv(K, 128), triton.cdiv(N, 128)
            sa = torch.exp2(torch.randint(-2, 3, (kb, M), device="cuda").float())  # [K / 128, M]
            sb = torch.exp2(torch.randint(-2, 3, (nb, kb), device="cuda").float())  # [N / 128, K / 128]
            full_a = a.float() * sa.T.repeat_interleave(128, 1)[:, :K]
            full_b = b.float() * sb.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
            reference = full_a @ full_b.T
            full_a = full_b = None
            flop = 2.0 * M * N * K
            try:
                out, row["baseline"] = _blockwise_scaled_mm(a, b, sa, sb)
                row["baseline_rel_err"] = _rel_err(out, reference)
                ms = _bench_ms(lambda: _blockwise_scaled_mm(a, b, sa, sb))
                row["baseline_ms"], row["baseline_tflops"] = ms, flop / ms / 1e9
            except Exception as e:
                row["baseline_error"] = _err(e)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            _best_config(row, MM_CONFIGS_BLOCKWISE, c, reference, flop,
                         lambda cfg: triton_matmul(a, b, c, cfg, sa, sb, blockwise=True))
        except Exception as e:
            row["error"] = _err(e)
        finally:
            a = b = c = sa = sb = reference = out = None
            _free()
        _add_row(rows, row)
    return {"configs": MM_CONFIGS_BLOCKWISE, "layout": "C = A @ B.T with A's [K/128, M] and B's [N/128, K/128] "
            "block scales, A (M,K), B (N,K) e4m3, C bf16", "shapes": rows}


def matmul_shapes(args):
    """bf16 at the shapes bench/gemm_bench --tune-shapes autotunes (--tune-shapes here), on operands drawn as
    gemm_bench draws them: bf16 bits uniform in [0x3C00, 0x3F80] (values in [1/128, 1])."""
    rows = []
    for M, N, K in args.tune_shapes:
        def inputs():
            def bits(rows_, cols):
                raw = torch.randint(0x3C00, 0x3F81, (rows_, cols), device="cuda", dtype=torch.int32)
                return raw.to(torch.int16).view(torch.bfloat16)
            return bits(M, K), bits(N, K), "uniform bits"
        _add_row(rows, _matmul_row(args, M, N, K, torch.bfloat16, inputs))
    return {"configs": MM_CONFIGS, "layout": "C = A @ B.T, A (M,K), B (N,K) row-major, C bf16", "shapes": rows}


def matmul_pointer(args):
    """Triton's tutorial-form matmul at its best of PTR_CONFIGS, and cuBLAS, bf16 at MM_SHAPES."""
    rows = []
    for M, N, K in MM_SHAPES:
        row = {"M": M, "N": N, "K": K, "dtype": "bfloat16"}
        try:
            a, b, row["inputs"] = _gemm_inputs(args, M, N, K, torch.bfloat16)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            reference = torch.matmul(a, b.T)
            flop = 2.0 * M * N * K
            row["cublas_tflops"] = flop / _bench_ms(lambda: torch.matmul(a, b.T)) / 1e9
            _best_config(row, PTR_CONFIGS, c, reference, flop, lambda cfg: triton_pointer_matmul(a, b, c, cfg))
        except Exception as e:
            row["error"] = _err(e)
        finally:
            a = b = c = None
            _free()
        _add_row(rows, row)
    return {"configs": PTR_CONFIGS, "layout": "C = A @ B.T through pointers, A (M,K), B (N,K) row-major, C bf16",
            "shapes": rows}


def _moe_row(gen, tokens, top_k, experts, N, K, dtype):
    """One shape of moe_gemm: Triton at its best configuration, and for bf16 torch eager and cuBLAS on a dense
    GEMM of the same size; for fp8 (e4m3 values in [0.5, 1), per-tensor scales of 1, C bf16) torch._scaled_mm
    on that dense GEMM."""
    fp8 = dtype == torch.float8_e4m3fn
    row = {"M": tokens * top_k, "N": N, "K": K, "tokens": tokens, "top_k": top_k, "experts": experts,
           "dtype": str(dtype).replace("torch.", "")}
    try:
        n = tokens * top_k
        if fp8:
            a = (torch.rand(tokens, K, device="cuda", generator=gen) * 0.5 + 0.5).to(dtype)
            w = (torch.rand(experts, N, K, device="cuda", generator=gen) * 0.5 + 0.5).to(dtype)
            scales = (torch.ones(1, device="cuda"), torch.ones(experts, device="cuda"))
        else:
            a = torch.rand(tokens, K, device="cuda", generator=gen).to(dtype)
            w = torch.rand(experts, N, K, device="cuda", generator=gen).to(dtype) / 16
            scales = None
        ids = torch.randint(0, experts, (n,), device="cuda", generator=gen)
        sorted_ids, block_experts = moe_align(ids, experts, 64)
        c = torch.full((n, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        reference = moe_eager(a.to(torch.bfloat16), w.to(torch.bfloat16), ids, top_k)
        flop = 2.0 * n * N * K
        dense = a.repeat_interleave(top_k, dim=0)
        if fp8:
            one = scales[0].reshape(())
            row["dense_cublas_tflops"] = flop / _bench_ms(lambda: torch._scaled_mm(
                dense, w[0].T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)) / 1e9
        else:
            row["eager_tflops"] = flop / _bench_ms(lambda: moe_eager(a, w, ids, top_k)) / 1e9
            row["dense_cublas_tflops"] = flop / _bench_ms(lambda: torch.matmul(dense, w[0].T)) / 1e9
        dense = None
        _best_config(row, MOE_CONFIGS_FP8 if fp8 else MOE_CONFIGS, c, reference, flop,
                     lambda cfg: triton_moe_gemm(a, w, c, sorted_ids, block_experts, top_k, cfg, scales=scales))
    except Exception as e:
        row["error"] = _err(e)
    finally:
        a = w = c = ids = sorted_ids = block_experts = reference = dense = None
        _free()
    return row


def moe_gemm(args):
    """The MoE GEMM over grouped choices, bf16 and fp8: Triton (best of MOE_CONFIGS, MOE_CONFIGS_FP8), torch
    eager, dense cuBLAS."""
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for shape in MOE_SHAPES:
        for dtype in (torch.bfloat16, torch.float8_e4m3fn):
            _add_row(rows, _moe_row(gen, *shape, dtype))
    return {"configs": MOE_CONFIGS, "configs_fp8": MOE_CONFIGS_FP8,
            "layout": "C[i] = A[i // top_k] @ W[ids[i]].T, A (tokens,K), W (E,N,K), bf16 or fp8 e4m3 in, bf16 out",
            "shapes": rows}


def fused_epilogue(args):
    """cuBLAS's own bias + GELU epilogue (cublasLt GELU_BIAS, tanh form, through torch._addmm_activation)
    against its plain GEMM on the same tensors, and the unfused three kernels users would write first."""
    rows = []
    for M, N, K in MM_SHAPES:
        row = {"M": M, "N": N, "K": K}
        try:
            a, b, row["inputs"] = _gemm_inputs(args, M, N, K, torch.bfloat16)
            bias = b.reshape(-1)[:N].contiguous()  # B's first N elements, as bench/gemm_bench takes them
            plain = lambda: torch.matmul(a, b.T)
            fused = lambda: torch._addmm_activation(bias, a, b.T, use_gelu=True)
            unfused = lambda: torch.nn.functional.gelu(torch.matmul(a, b.T) + bias, approximate="tanh")
            reference = torch.nn.functional.gelu(torch.matmul(a.float(), b.float().T) + bias.float(),
                                                 approximate="tanh")
            row["fused_rel_err"] = _rel_err(fused(), reference)
            row["ok"] = row["fused_rel_err"] < 1e-2
            for name, fn in (("plain", plain), ("fused", fused), ("unfused", unfused)):
                row[name + "_ms"] = _bench_ms(fn)
            row["fused_over_plain"] = row["fused_ms"] / row["plain_ms"]
            row["unfused_over_plain"] = row["unfused_ms"] / row["plain_ms"]
        except Exception as e:
            row["error"] = _err(e)
        finally:
            a = b = bias = None
            _free()
        _add_row(rows, row)
    return {"layout": "C = gelu_tanh(A @ B.T + bias), bf16, A (M,K), B (N,K), bias (N)", "shapes": rows}


def copy_bandwidth(args):
    src = dst = None
    try:
        src = torch.randn((1 << 30) // 2, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        ms = _bench_ms(lambda: dst.copy_(src))
        res = {"bytes": src.nbytes, "ms": ms, "gb_per_s": 2 * src.nbytes / (ms * 1e-3) / 1e9}
        res["copy_ok"] = bool(torch.equal(dst, src))
        return res
    finally:
        src = dst = None
        _free()


def elementwise_bandwidth(args):
    # What gpu_bench's vector_add is compared with: torch's own kernel on
    # the same size (64 Mi f32 elements).
    x = y = z = None
    try:
        n = 64 << 20
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        z = torch.empty_like(x)
        ms = _bench_ms(lambda: torch.add(x, y, out=z))
        return {"add_ms": ms, "add_gb_per_s": 3 * x.nbytes / (ms * 1e-3) / 1e9}
    finally:
        x = y = z = None
        _free()


MEASUREMENTS = {f.__name__: f for f in (launch_descriptors, cold_compile_matmul, matmul_tflops, matmul_rowwise,
                                        matmul_blockwise, matmul_shapes, matmul_pointer, moe_gemm, fused_epilogue, copy_bandwidth,
                                        elementwise_bandwidth)}


# ---------------------------------------------------------------------------- report

def header():
    h = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": sys.version.split()[0],
         "torch": torch.__version__, "triton": triton.__version__, "torch_cuda": torch.version.cuda}
    try:
        h["device"] = torch.cuda.get_device_name()
        h["capability"] = list(torch.cuda.get_device_capability())
        h["sms"] = num_sms()
    except Exception as e:
        h["device_error"] = _err(e)
    try:
        h["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                     capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        h["driver_error"] = str(e)
    return h


def _f(d, key, fmt):
    if key in d:
        return format(d[key], fmt)
    for k in (key + "_error", key.split("_")[0] + "_error", "error"):
        if k in d:
            return "ERROR " + str(d[k])[:80]
    return "missing"


def _shape_lines(out, r, label, line):
    """A line per shape of measurement `r`: line(row), or the error that row recorded."""
    for row in r.get("shapes", []):
        out.append((label(row), "ERROR " + row["error"][:100] if "error" in row else line(row)))


def _triton_best(row):  # Triton's best TFLOP/s and the configuration that gave it
    return f"triton {_f(row, 'triton_tflops', '.1f')} ({row.get('triton_config', '?')})"


def _verdict(row, err_key):  # the relative error under err_key, and whether the row passed
    return f"err {_f(row, err_key, '.1e')} {'ok' if row.get('ok') else 'FAIL'}"


def print_table(res):
    h, out = res["header"], []
    print(f"\n== Triton baselines: {h.get('device')}  torch {h['torch']}  triton {h['triton']} ==")
    r = res.get("launch_descriptors")
    if r is not None:
        out += [("launch, 3 TensorDescriptors", _f(r, "desc3_us", ".2f") + " us/launch (host)"),
                ("launch, 3 descriptors rebuilt", _f(r, "desc3_rebuilt_us", ".2f") + " us/launch (host)"),
                ("launch, 3 pointers", _f(r, "ptr3_us", ".2f") + " us/launch (host)"),
                ("launch+sync, desc / ptr", f"{_f(r, 'desc3_sync_us', '.2f')} / {_f(r, 'ptr3_sync_us', '.2f')} us")]
    r = res.get("cold_compile_matmul")
    if r is not None and "cold_s_median" not in r:
        out.append(("cold compile, TMA persistent mm", "ERROR " + str(r.get("error"))[:100]))
    elif r is not None:
        n_ok = len([x for x in r.get("runs", []) if "cold_s" in x])
        out += [("cold compile, TMA persistent mm",
                 f"{_f(r, 'cold_s_median', '.3f')} s median of {n_ok}, min {_f(r, 'cold_s_min', '.3f')} s"),
                ("  warm call, in-process", f"{_f(r, 'warm_launch_host_us_median', '.1f')} us host, "
                                            f"{_f(r, 'warm_call_ms_median', '.3f')} ms to sync"),
                ("  new process, disk-cache hit", _f(r.get("disk_cache_hit", {}), "load_s", ".3f") + " s"),
                (f"  compiles of its {len(MM_CONFIGS)} configurations", _f(r, "configs_cold_total_s_median", ".3f")
                 + " s median")]
    r = res.get("matmul_tflops")
    if r is not None:
        _shape_lines(out, r, lambda row: f"matmul {row['M']}x{row['N']}x{row['K']} "
                                         f"{row.get('dtype', '').replace('float8_e4m3fn', 'f8e4m3')}",
                     lambda row: f"triton {_f(row, 'triton_tflops', '.1f')}  cublas {_f(row, 'cublas_tflops', '.1f')}"
                                 + (f" (f32 sums {_f(row, 'cublas_f32_sums_tflops', '.1f')})"
                                    if "cublas_f32_sums_tflops" in row else "")
                                 + f" TFLOP/s  ratio {_f(row, 'triton_over_cublas', '.3f')}"
                                 "  " + _verdict(row, 'rel_err'))
        if "error" in r:
            out.append(("matmul", "ERROR " + r["error"][:100]))
    r = res.get("matmul_blockwise")
    if r is not None:
        _shape_lines(out, r, lambda row: f"blockwise f8e4m3 {row['M']}x{row['N']}x{row['K']}",
                     lambda row: _triton_best(row) +
                                 f"  {row.get('baseline', 'cublas')} {_f(row, 'baseline_tflops', '.1f')} TFLOP/s"
                                 "  " + _verdict(row, 'rel_err'))
    r = res.get("matmul_shapes")
    if r is not None:
        _shape_lines(out, r, lambda row: f"matmul bf16 {row['M']}x{row['N']}x{row['K']}",
                     lambda row: _triton_best(row) +
                                 f"  cublas {_f(row, 'cublas_tflops', '.1f')} TFLOP/s"
                                 f"  {_f(row, 'cublas_ms', '.4f')} ms")
    r = res.get("matmul_pointer")
    if r is not None:
        _shape_lines(out, r, lambda row: f"pointer matmul bf16 {row['M']}x{row['N']}x{row['K']}",
                     lambda row: _triton_best(row) +
                                 f"  cublas {_f(row, 'cublas_tflops', '.1f')} TFLOP/s"
                                 "  " + _verdict(row, 'rel_err'))
    r = res.get("moe_gemm")
    if r is not None:
        _shape_lines(out, r, lambda row: f"moe gemm {row['dtype']} {row['tokens']}x{row['top_k']} of "
                                         f"{row['experts']}, {row['N']}x{row['K']}",
                     lambda row: _triton_best(row) +
                                 f"  eager {_f(row, 'eager_tflops', '.1f')}"
                                 f"  dense cublas {_f(row, 'dense_cublas_tflops', '.1f')} TFLOP/s"
                                 "  " + _verdict(row, 'rel_err'))
    r = res.get("fused_epilogue")
    if r is not None:
        _shape_lines(out, r, lambda row: f"cublas bias+gelu {row['M']}x{row['N']}x{row['K']}",
                     lambda row: f"fused {_f(row, 'fused_ms', '.4f')} ms  plain {_f(row, 'plain_ms', '.4f')} ms"
                                 f"  ratio {_f(row, 'fused_over_plain', '.3f')}"
                                 f"  unfused {_f(row, 'unfused_over_plain', '.3f')}"
                                 "  " + _verdict(row, 'fused_rel_err'))
    r = res.get("copy_bandwidth")
    if r is not None:
        out.append(("copy 1 GiB bf16, read+write", _f(r, "gb_per_s", ".1f") + " GB/s"
                    + ("" if r.get("copy_ok", True) else "  (copy MISMATCH)")))
    r = res.get("elementwise_bandwidth")
    if r is not None:
        out.append(("torch add, 64 Mi f32", _f(r, "add_gb_per_s", ".1f") + " GB/s (3 arrays)"))
    for label, value in out:
        print(f"{label:<34}{value}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="output path (default $OUT/triton.json, else ./triton.json)")
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(MEASUREMENTS))
    ap.add_argument("--launches", type=int, default=20000, help="timed launches per launch case")
    ap.add_argument("--cold-runs", type=int, default=3, help="fresh-cache compile runs (one process each)")
    ap.add_argument("--child-timeout", type=float, default=240, help="seconds per cold-compile child")
    ap.add_argument("--gemm-inputs", help="directory where bench/gemm_bench --inputs left the GEMM's tensors")
    ap.add_argument("--tune-shapes", type=_shapes, default=[(3000, 5000, 712)],
                    help="MxNxK,... for matmul_shapes (bench/gemm_bench's --tune-shapes)")
    ap.add_argument("--child", choices=["cold_compile"], help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        triton.set_allocator(_alloc)
    except Exception as e:
        print(f"triton.set_allocator failed: {e}", file=sys.stderr, flush=True)
    if args.child:
        child_cold_compile()
        return 0

    path = args.json or os.path.join(os.environ.get("OUT") or ".", "triton.json")
    names = [n.strip() for n in args.only.split(",")] if args.only else list(MEASUREMENTS)
    unknown = [n for n in names if n not in MEASUREMENTS]
    if unknown:
        ap.error(f"unknown measurement(s) {unknown}; choose from {list(MEASUREMENTS)}")
    results = {"header": header()}

    def write():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(_clean(results), f, indent=2)

    for name in names:
        print(f"[{name}] ...", flush=True)
        t0 = time.perf_counter()
        try:
            results[name] = MEASUREMENTS[name](args)
        except Exception as e:
            results[name] = {"error": _err(e)}
        results[name]["wall_s"] = time.perf_counter() - t0
        print(f"[{name}] done in {results[name]['wall_s']:.1f} s", flush=True)
        write()
    print_table(results)
    print(f"\nJSON written to {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
