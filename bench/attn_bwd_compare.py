#!/usr/bin/env python3
"""The baselines of bench/attn_bwd_bench: attention's backward pass as tessel's users would otherwise run
it, on the same GPU and shapes (4 x 32 heads, sequence lengths 1024, 4096 and 16384, head dimensions 64
and 128, bf16, with and without the causal mask; grouped query heads, 32 on 8 KV heads at d 128, with
enable_gqa): torch.nn.functional.scaled_dot_product_attention's backward on its flash-attention
(sdpa-flash), cuDNN (sdpa-cudnn) and memory-efficient (sdpa-mem) backends, after a forward on the same
backend.

Timed with triton.testing.do_bench (median, L2 flushed before each run), as attn_bwd_bench times tessel:
torch.autograd.grad over the kept forward, so only the backward's kernels run. dQ, dK and dV are checked
against torch's math backend in f32 on three KV heads (two with groups) and their query heads (the
largest difference over the largest reference value). With --tessel PATH (attn_bwd_bench's JSON from the same run) it prints each baseline's time over
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


def time_ms(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def checked_heads(group):
    """The checked KV heads and their query heads, as flattened batch x head indices."""
    kv = BATCH * HEADS // group
    kv_heads = [0, kv // 2 + 1, kv - 1] if group == 1 else [0, kv - 1]
    return [h * group + g for h in kv_heads for g in range(group)], kv_heads


def pick(t, heads):
    length, d = t.shape[-2:]
    return t.detach().reshape(-1, length, d)[heads]


def reference(q, k, v, dout, causal, group):
    """dQ, dK and dV of the checked heads from torch's math backend, in f32 (a KV head's dK and dV summed
    over its query heads)."""
    q_heads, kv_heads = checked_heads(group)
    ins = [pick(t, at).float().requires_grad_() for t, at in ((q, q_heads), (k, kv_heads), (v, kv_heads))]
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(ins[0], ins[1].repeat_interleave(group, 0),
                                             ins[2].repeat_interleave(group, 0), is_causal=causal)
    return torch.autograd.grad(out, ins, pick(dout, q_heads).float())


def error(grads, want, group):
    q_heads, kv_heads = checked_heads(group)
    return max(((pick(g, at).float() - w).abs().max() / w.abs().max()).item()
               for g, w, at in zip(grads, want, (q_heads, kv_heads, kv_heads)))


def main():
    args = parse_args("attn_bwd_bench")
    tessel = tessel_results(args.tessel)
    print(f"attn_bwd_compare on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    results = []
    for length, d, causal, group, name in cases(args.only):
        q, k, v, dout = random_inputs(length, d, [HEADS, HEADS // group, HEADS // group, HEADS])
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        want = reference(q, k, v, dout, causal, group)
        flops = 10.0 * BATCH * HEADS * length * length * d * (0.5 if causal else 1.0)
        row = {"len": length, "d": d, "causal": causal, "group": group, "baselines": {}}
        for label, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
                run = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                err = error(run(), want, group)
                ms = time_ms(run)
            except RuntimeError as e:
                row["baselines"][label] = {"error": str(e).splitlines()[0][:120]}
                continue
            row["baselines"][label] = {"us": ms * 1e3, "max_error": err}
            del out
        print_case(name, flops, tessel.get((length, d, causal, group)), row["baselines"])
        results.append(row)
    write_json(args.json, torch.cuda.get_device_name(), results)


if __name__ == "__main__":
    main()
