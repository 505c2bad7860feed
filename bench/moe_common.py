"""What bench/triton_compare.py's moe_gemm and bench/moe_compare.py share: a Triton kernel of
samples::moe_gemm_kernel's form, its configurations, the grouping of choices by expert (samples::MoeAlign's)
and the GEMM as torch eager writes it."""
import torch
import triton
import triton.language as tl

# The configurations tried; Triton is reported at its best (fp8 at rows of 128 bytes, as for 16-bit types).
MOE_CONFIGS = [dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=4),
               dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=4),
               dict(BLOCK_M=64, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_stages=3, num_warps=8),
               dict(BLOCK_M=64, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_stages=4, num_warps=8)]
MOE_CONFIGS_FP8 = [dict(c, BLOCK_K=128) for c in MOE_CONFIGS]


@triton.jit
def moe_gemm_kernel(a_ptr, w_ptr, c_ptr, sorted_ptr, block_expert_ptr, weights_ptr, scale_a_ptr, scale_w_ptr,
                    total, n, top_k, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr, ROUTED: tl.constexpr, SCALED: tl.constexpr):
    # samples::moe_gemm_kernel's form: a block of BLOCK_M positions of the grouped order (one expert's) by
    # BLOCK_N columns, A's rows gathered by their tokens, C's rows scattered to their choices (scaled by
    # A's scale and the expert's where SCALED, and by their router weights where ROUTED). A block of
    # expert -1 lies past the groups and does nothing.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(total, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    if pid >= tiles_m * tiles_n:
        return
    per_group = GROUP_M * tiles_n
    first_m = pid // per_group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    block = first_m + pid % per_group % group_rows
    expert = tl.load(block_expert_ptr + block).to(tl.int64)
    if expert < 0:
        return
    cols = (pid % per_group // group_rows) * BLOCK_N + tl.arange(0, BLOCK_N)
    choice = tl.load(sorted_ptr + block * BLOCK_M + tl.arange(0, BLOCK_M))
    row_in = choice < n
    a_rows = a_ptr + (choice // top_k)[:, None] * K
    w_rows = w_ptr + expert * N * K + cols[None, :] * K
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kin = k0 + ks
        a = tl.load(a_rows + kin[None, :], mask=row_in[:, None] & (kin[None, :] < K), other=0.0)
        b = tl.load(w_rows + kin[:, None], mask=(kin[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    if SCALED:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_w_ptr + expert))
    if ROUTED:
        acc = acc * tl.load(weights_ptr + choice, mask=row_in, other=0.0)[:, None]
    tl.store(c_ptr + choice[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=row_in[:, None] & (cols[None, :] < N))


def moe_align(ids, experts, block):
    """samples::MoeAlign's grouping in torch: the choices' indices expert by expert, each group padded with
    n to a multiple of `block`, and each block's expert (on the host between kernels)."""
    n = ids.numel()
    order = torch.argsort(ids, stable=True).to(torch.int32)
    counts = torch.bincount(ids, minlength=experts).tolist()
    sorted_ids, block_experts, at = [], [], 0
    for e, c in enumerate(counts):
        padded = (c + block - 1) // block * block
        sorted_ids.append(order[at:at + c])
        sorted_ids.append(torch.full((padded - c,), n, dtype=torch.int32, device=ids.device))
        block_experts += [e] * (padded // block)
        at += c
    return torch.cat(sorted_ids), torch.tensor(block_experts, dtype=torch.int32, device=ids.device)


def moe_align_device(ids, experts, block):
    """The same grouping in torch ops that stay on the GPU (no synchronization, as a layer needs): the
    groups in the room samples::moe_align_capacity gives them, n past the last group, and expert -1 for
    the blocks there."""
    n = ids.numel()
    capacity = (n + experts * (block - 1)) // block * block
    counts = torch.bincount(ids, minlength=experts)
    padded = (counts + block - 1) // block * block
    ends = torch.cumsum(padded, 0)
    order = torch.argsort(ids, stable=True)
    grouped = ids[order]
    rank = torch.arange(n, device=ids.device) - (torch.cumsum(counts, 0) - counts)[grouped]
    sorted_ids = torch.full((capacity,), n, dtype=torch.int32, device=ids.device)
    sorted_ids[(ends - padded)[grouped] + rank] = order.to(torch.int32)
    starts = torch.arange(0, capacity, block, device=ids.device)
    block_experts = torch.searchsorted(ends, starts, right=True)
    return sorted_ids, torch.where(block_experts < experts, block_experts, -1).to(torch.int32)


def triton_moe_gemm(a, w, c, sorted_ids, block_experts, top_k, cfg, weights=None, scales=None):
    """c [n, N] = rows of a (a choice's token's: choice // top_k) times its expert's w [E, N, K] transposed,
    scaled by `scales` (A's [1] and the experts' [E], f32) and by the choices' `weights` where given."""
    n, N = c.shape
    K = a.shape[1]
    grid = (block_experts.numel() * triton.cdiv(N, cfg["BLOCK_N"]),)
    scale_a, scale_w = (c, c) if scales is None else scales
    moe_gemm_kernel[grid](a, w, c, sorted_ids, block_experts, c if weights is None else weights, scale_a, scale_w,
                          sorted_ids.numel(), n, top_k, N, K, ROUTED=weights is not None, SCALED=scales is not None,
                          **cfg)
    return c


def moe_eager(a, w, ids, top_k):
    """What a torch user writes: per expert, its choices' rows of A times its weights."""
    out = torch.empty(ids.numel(), w.shape[1], device=a.device, dtype=a.dtype)
    for e in range(w.shape[0]):
        chosen = (ids == e).nonzero().squeeze(1)
        out[chosen] = a[chosen // top_k] @ w[e].T
    return out
