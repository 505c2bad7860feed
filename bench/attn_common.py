"""What bench/attn_compare.py and bench/attn_bwd_compare.py share: the shapes of attn_bench and
attn_bwd_bench (4 x 32 heads, sequence lengths 1024, 4096 and 16384, head dimensions 64 and 128, with
and without the causal mask; and Llama 3 8B's grouped heads, 32 query heads on 8 KV heads at d 128,
lengths 4096 and 16384), their flags, tessel's results from the same run, and the line printed for each
case."""
import argparse
import json

import torch

BATCH, HEADS = 4, 32
LENS = [1024, 4096, 16384]
DIMS = [64, 128]
GROUPED = ([4096, 16384], 128, 4)  # lengths, d and query heads per KV head of the grouped cases


def parse_args(bench):
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessel", help=f"{bench}'s JSON from the same run")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    return parser.parse_args()


def random_inputs(length, d, heads):
    """bf16 tensors [BATCH, h, length, d] for each h of `heads`, uniform in [-1, 1), the same ones for a
    shape in every run."""
    gen = torch.Generator(device="cuda").manual_seed(length + d)
    return [torch.rand((BATCH, h, length, d), device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
            for h in heads]


def tessel_results(path):
    """tessel's cases by (len, d, causal, group), from the benchmark's JSON at `path` (none without
    one)."""
    if not path:
        return {}
    with open(path) as f:
        return {(case["len"], case["d"], case["causal"], case.get("group", 1)): case
                for case in json.load(f)["cases"]}


def cases(only):
    """(length, d, causal, group, name) of each case whose name contains `only`, in the benchmarks'
    order (bench/attn_cases.h)."""
    shapes = [(length, d, 1) for d in DIMS for length in LENS]
    shapes += [(length, GROUPED[1], GROUPED[2]) for length in GROUPED[0]]
    for length, d, group in shapes:
        for causal in (False, True):
            name = f"len {length}, d {d}" + (f", group {group}" if group > 1 else "") + (", causal" if causal else "")
            if only in name:
                yield length, d, causal, group, name


def print_case(name, flops, mine, baselines):
    """One line: tessel's time and TFLOP/s, then each baseline's with its time over tessel's."""
    line = f"{name:28s}"
    if mine:
        line += f" tessel {mine['us']:9.1f} us {flops / mine['us'] / 1e6:6.1f} TFLOP/s |"
    for label, r in baselines.items():
        if "us" not in r:
            line += f" {label}: -"
            continue
        line += f" {label} {r['us']:9.1f} us {flops / r['us'] / 1e6:6.1f}"
        if mine:
            line += f" ({r['us'] / mine['us']:.2f}x)"
        if "config" in r:
            line += f" [{r['config']}]"
    print(line, flush=True)


def write_json(path, device, results):
    if path:
        with open(path, "w") as f:
            json.dump({"device": device, "cases": results}, f, indent=1)
