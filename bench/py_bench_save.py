"""Peer bench: what users do today (torch.save of per-rank files) against
hy.save, on the same state, in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/py_bench_save.py \
        [--gib 1] [--ranks 4] [--load-ranks 3] [--json]

Each of --ranks processes (torch.distributed, gloo, 127.0.0.1) holds its
row shard of a float32 state of --gib GiB (randn: weight-like, poorly
compressible) and:
  1. torch.save: writes rank<r>.pt and fsyncs it (durable), vs hy.save
     (its stores sync); time = slowest rank, between barriers;
  2. saves again with a contiguous 1% of the values changed;
  3. --load-ranks processes load the state under another sharding: torch
     loads every rank file whose rows overlap its own and slices; hy.load
     fills hy.Shards in place.
Prints a table (MB/s of the state's bytes; bytes on disk) or --json.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TENSORS = 8  # The state is this many equal 2-d tensors.


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def rank_main(args):
    import torch
    import torch.distributed as dist

    import hy

    mode, work, rank, world = args.mode, args.work, args.rank, args.world
    dist.init_process_group("gloo", rank=rank, world_size=world)
    cols = 1024
    rows = int(args.gib * (1 << 30)) // 4 // cols // TENSORS
    shape = (rows, cols)

    def full(i, changed):
        g = torch.Generator().manual_seed(i)
        t = torch.randn(shape, generator=g)
        if changed:
            n = t.numel() // 100
            t.view(-1)[:n] += 1.0
        return t

    def my_rows(n, r, w):
        return n * r // w, n * (r + 1) // w

    out = {}
    if mode in ("save", "change"):
        lo, hi = my_rows(rows, rank, world)
        state = {f"t{i}": full(i, mode == "change")[lo:hi].clone()
                 for i in range(TENSORS)}
        # torch.save of a per-rank file, durable.
        dist.barrier()
        t0 = time.perf_counter()
        f = os.path.join(work, "torch", f"rank{rank}.pt")
        torch.save(state, f)
        with open(f, "rb+") as fh:
            os.fsync(fh.fileno())
        dist.barrier()
        out["torch_s"] = time.perf_counter() - t0
        shards = {k: hy.Shard(v, [lo, 0], shape) for k, v in state.items()}
        dist.barrier()
        t0 = time.perf_counter()
        hy.save(os.path.join(work, "hy"), shards)
        dist.barrier()
        out["hy_s"] = time.perf_counter() - t0
    else:  # load under another sharding
        lo, hi = my_rows(rows, rank, world)
        old = args.saved_ranks
        dist.barrier()
        t0 = time.perf_counter()
        got = {}
        for r in range(old):
            olo, ohi = my_rows(rows, r, old)
            if ohi <= lo or olo >= hi:
                continue
            part = torch.load(os.path.join(work, "torch", f"rank{r}.pt"))
            for k, v in part.items():
                a, b = max(lo, olo), min(hi, ohi)
                got.setdefault(k, torch.empty(hi - lo, cols))[
                    a - lo:b - lo] = v[a - olo:b - olo]
        dist.barrier()
        out["torch_s"] = time.perf_counter() - t0
        targets = {f"t{i}": hy.Shard(torch.empty(hi - lo, cols), [lo, 0],
                                     shape) for i in range(TENSORS)}
        dist.barrier()
        t0 = time.perf_counter()
        hy.load(os.path.join(work, "hy"), targets)
        dist.barrier()
        out["hy_s"] = time.perf_counter() - t0
        for k in got:
            assert torch.equal(got[k], targets[k].tensor), k
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.destroy_process_group()


def run(mode, work, world, args, saved_ranks=0):
    port = free_port()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--rank-mode", mode, "--work", work,
         "--rank", str(r), "--world", str(world), "--gib", str(args.gib),
         "--saved-ranks", str(saved_ranks)],
        stdout=subprocess.PIPE, env=env, text=True) for r in range(world)]
    result = None
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"{mode}: a rank failed ({p.returncode})")
        for line in out.splitlines():
            if line.startswith("{"):
                result = json.loads(line)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--load-ranks", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rank-mode", dest="mode", default=None)
    ap.add_argument("--work")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--saved-ranks", type=int, default=0)
    args = ap.parse_args()
    if args.mode:
        return rank_main(args)
    work = tempfile.mkdtemp(prefix="hy-pybench-", dir=args.dir)
    os.makedirs(os.path.join(work, "torch"))
    try:
        mb = args.gib * (1 << 30) / 1e6
        first = run("save", work, args.ranks, args)
        disk = {"torch": du(os.path.join(work, "torch")),
                "hy": du(os.path.join(work, "hy"))}
        second = run("change", work, args.ranks, args)
        disk2 = {"torch": du(os.path.join(work, "torch")),
                 "hy": du(os.path.join(work, "hy"))}
        load = run("load", work, args.load_ranks, args, args.ranks)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for who in ("torch", "hy"):
        rows.append({
            "writer": "torch.save per-rank files" if who == "torch"
                      else "hy.save",
            "save_mb_s": mb / first[f"{who}_s"],
            "second_save_s": second[f"{who}_s"],
            "load_reshard_mb_s": mb / load[f"{who}_s"],
            "disk_mb_after_first": disk[who] / 1e6,
            "disk_mb_after_second": disk2[who] / 1e6,
        })
    if args.json:
        print(json.dumps({"state_mb": mb, "ranks": args.ranks,
                          "load_ranks": args.load_ranks, "rows": rows},
                         indent=2))
        return
    print(f"state {mb:.0f} MB fp32 on {args.ranks} ranks, loaded on "
          f"{args.load_ranks}; durable saves; one run")
    head = ("writer", "save MB/s", "2nd save s (1% changed)",
            "load+reshard MB/s", "disk MB", "disk MB after 2nd")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['writer']} | {r['save_mb_s']:.0f} | "
              f"{r['second_save_s']:.2f} | {r['load_reshard_mb_s']:.0f} | "
              f"{r['disk_mb_after_first']:.0f} | "
              f"{r['disk_mb_after_second']:.0f} |")
    t, h = rows
    print(f"hy/torch: save {h['save_mb_s'] / t['save_mb_s']:.2f}x, 2nd save "
          f"{t['second_save_s'] / h['second_save_s']:.2f}x faster, load "
          f"{h['load_reshard_mb_s'] / t['load_reshard_mb_s']:.2f}x, disk "
          f"{h['disk_mb_after_second'] / t['disk_mb_after_second']:.2f}x")


if __name__ == "__main__":
    main()
