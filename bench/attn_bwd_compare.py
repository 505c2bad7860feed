#!/usr/bin/env python3
"""The baselines of bench/attn_bwd_bench: attention's backward pass as tessel's users would otherwise run
it, on the same GPU and shapes (4 x 32 heads, sequence lengths 1024, 4096 and 16384, head dimensions 64
and 128, bf16, with and without the causal mask): torch.nn.functional.scaled_dot_product_attention's
backward on its flash-attention (sdpa-flash), cuDNN (sdpa-cudnn) and memory-efficient (sdpa-mem)
backends, after a forward on the same backend.

Timed with triton.testing.do_bench (median, L2 flushed before each run), as attn_bwd_bench times tessel:
torch.autograd.grad over the kept forward, so only the backward's kernels run. dQ, dK and dV are checked
against torch's math backend in f32 on three heads (the largest difference over the largest reference
value). With --tessel PATH (attn_bwd_bench's JSON from the same run) it prints each baseline's time over
tessel's (above 1: tessel is faster). TFLOP/s count 10 * heads * len^2 * d, half of it with the mask.

Usage: python3 bench/attn_bwd_compare.py [--tessel PATH] [--json PATH] [--only TEXT]
"""
import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_common import BATCH, HEADS, cases, parse_args, print_case, random_inputs, tessel_results, write_json
BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-mem": SDPBackend.EFFICIENT_ATTENTION,
}
CHECKED = [0, HEADS * BATCH // 2 + 1, HEADS * BATCH - 1]  # flattened batch x head indices


def time_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def checked(t, length, d):
    return t.detach().reshape(-1, length, d)[CHECKED]


def reference(q, k, v, dout, causal):
    """dQ, dK and dV of the checked heads from torch's math backend, in f32."""
    length, d = q.shape[-2:]
    ins = [checked(t, length, d).float().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(*ins, is_causal=causal)
    return torch.autograd.grad(out, ins, checked(dout, length, d).float())


def error(grads, want):
    length, d = want[0].shape[-2:]
    return max(((checked(g, length, d).float() - w).abs().max() / w.abs().max()).item()
               for g, w in zip(grads, want))


def main():
    args = parse_args("attn_bwd_bench")
    tessel = tessel_results(args.tessel)
    print(f"attn_bwd_compare on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    results = []
    for length, d, causal, name in cases(args.only):
        q, k, v, dout = random_inputs(length, d, 4)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        want = reference(q, k, v, dout, causal)
        flops = 10.0 * BATCH * HEADS * length * length * d * (0.5 if causal else 1.0)
        row = {"len": length, "d": d, "causal": causal, "baselines": {}}
        for label, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                run = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                err = error(run(), want)
                ms = time_ms(run)
            except RuntimeError as e:
                row["baselines"][label] = {"error": str(e).splitlines()[0][:120]}
                continue
            row["baselines"][label] = {"us": ms * 1e3, "max_error": err}
            del out
        print_case(name, flops, tessel.get((length, d, causal)), row["baselines"])
        results.append(row)
    write_json(args.json, torch.cuda.get_device_name(), results)


if __name__ == "__main__":
    main()
