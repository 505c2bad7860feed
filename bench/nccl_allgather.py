#!/usr/bin/env python3
"""What users would run instead of a triggered all-gather: a producer followed
by NCCL's all-gather (torch.distributed), on every GPU of the machine (at
least two), one process per GPU.

    python3 nccl_allgather.py [--json FILE]

Prints, per shard size, NCCL all-gather time and bus bandwidth, and producer
(writing the shard `passes` times, like tessel's all-gather producer) followed
by the all-gather.
"""
import argparse
import json
import os
import statistics
import sys


def worker(rank, world, results):
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    rows = []
    for mib in (16, 64, 256):
        n = mib * (1 << 20) // 4
        shard = torch.empty(n, dtype=torch.int32, device="cuda")
        out = torch.empty(n * world, dtype=torch.int32, device="cuda")

        def timed(fn, reps=20):
            ts = []
            for i in range(reps + 3):
                dist.barrier()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                if i >= 3:
                    ts.append(start.elapsed_time(end) * 1e3)
            return statistics.median(ts)

        gather = timed(lambda: dist.all_gather_into_tensor(out, shard))
        rows.append({"what": f"NCCL all_gather_into_tensor, {mib} MiB per rank, {world} ranks", "value": gather,
                     "unit": "us", "busbw_GBps": mib * (1 << 20) * (world - 1) / (gather * 1e-6) / 1e9})
        for passes in (1, 8, 32):
            def producer():
                for p in range(passes):
                    shard.fill_(p)
            alone = timed(producer)
            both = timed(lambda: (producer(), dist.all_gather_into_tensor(out, shard)))
            rows.append({"what": f"torch producer ({passes} passes) alone, {mib} MiB", "value": alone, "unit": "us"})
            rows.append({"what": f"torch producer ({passes} passes) + NCCL all-gather, {mib} MiB", "value": both,
                         "unit": "us"})
    if rank == 0:
        results.extend(rows)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    if world < 2:
        print("nccl_allgather: needs two GPUs; nothing to measure")
        return 0
    with mp.Manager() as manager:
        results = manager.list()
        mp.spawn(worker, args=(world, results), nprocs=world, join=True)
        results = list(results)
    for r in results:
        extra = f"  busbw {r['busbw_GBps']:.1f} GB/s" if "busbw_GBps" in r else ""
        print(f"{r['what']:<64} {r['value']:10.1f} {r['unit']}{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
