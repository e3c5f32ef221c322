"""Peer bench: what users do today (torch.save of per-rank files; PyTorch's
torch.distributed.checkpoint with its FileSystemWriter) against hystate.save and
hystate.dcp (DCP with hy's storage), on the same state, in one run.

    PYTHONPATH=build/python .venv/bin/python3 bench/py_bench_save.py \
        [--gib 1] [--ranks 4] [--load-ranks 3] [--processes N] [--json]
        [--dir DIR] [--dtype f32|bf16] [--repeat 3]

--processes N saves and loads on N processes (--processes 1: one process,
no resharding).

Each of --ranks processes (torch.distributed, gloo, 127.0.0.1) holds its
row shard (torch.chunk's split of dim 0, as DTensor's Shard(0)) of a
float32 state of --gib GiB (TENSORS equal 2-d tensors of randn:
weight-like, poorly compressible) and, one writer after another, each timed
between barriers (time = slowest rank):
  1. saves it durably:
       torch.save   rank<r>.pt per rank, fsynced;
       hystate.save      hystate.Shards (its stores sync);
       DCP FS       dcp.save of the shards as DTensors through
                    FileSystemWriter (sync_files) into fs/step-1;
       hystate.dcp       the same dcp.save through hystate.dcp.HyStorageWriter;
  2. saves again with a contiguous 1% of every tensor changed: torch.save
     overwrites its files, DCP FS writes fs/step-2 (a checkpoint per step,
     as DCP is used), hystate.save and hystate.dcp add a step to their stores
     (unchanged chunks are not written again);
  3. --load-ranks processes load the newest state under their own
     sharding: torch loads every rank file whose rows overlap its own and
     slices; hystate.load fills hystate.Shards in place; DCP FS and hystate.dcp dcp.load
     into DTensors of the new sharding. Every result is checked against
     the state. The loads run twice: warm (the files in the page cache, as
     the saves left them) and cold (each writer's files dropped from the
     page cache with posix_fadvise(DONTNEED) just before its load).
     A loader whose sharding equals the saver's takes torch.load's tensors
     as they are (no reslicing copy). Each load then runs again into
     tensors already in use (a model's, as load_state_dict finds them:
     allocated and written before the clock starts), torch.load's result
     copied into them: fresh targets make every loader fault its pages in,
     which on some VMs (this one returns freed memory to its host) costs
     more than the load itself. The warm loads are timed in the second
     process to load after the saves: in the first, on such a VM, every
     loader after the first one (torch.load) ran 2-5x slower than in the
     next process (in one run torch 0.52 s, then hystate 1.77, DCP FS 3.77;
     the next process 0.50, 0.54, 0.70).
--dtype bf16 makes the state bf16 (the same bytes, twice the values).
--repeat N runs the whole sequence N times in fresh directories and reports
each figure's median.
Prints a table (MB/s of the state's bytes; bytes on disk after each save)
or --json.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TENSORS = 8  # The state is this many equal 2-d tensors.
COLS = 1024
WRITERS = [  # key, label
    ("torch", "torch.save per-rank files"),
    ("hy", "hystate.save"),
    ("dcp_fs", "DCP FileSystemWriter (DTensor)"),
    ("dcp_hy", "hystate.dcp HyStorageWriter (DTensor)"),
]


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


def my_rows(n, r, w):
    """Rank r's rows of n: torch.chunk's split (DTensor's Shard(0))."""
    size = -(-n // w)
    lo = min(r * size, n)
    return lo, min(lo + size, n)


def dirs(work):
    return {"torch": os.path.join(work, "torch"),
            "hy": os.path.join(work, "hy"),
            "dcp_fs": os.path.join(work, "fs"),
            "dcp_hy": os.path.join(work, "hydcp")}


def rank_main(args):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    import hystate
    from hystate.dcp import HyStorageReader, HyStorageWriter

    mode, work, rank, world = args.mode, args.work, args.rank, args.world
    where = dirs(work)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    esize = 2 if args.dtype == "bf16" else 4
    rows = int(args.gib * (1 << 30)) // esize // COLS // TENSORS
    shape = (rows, COLS)

    def full(i, changed):
        g = torch.Generator().manual_seed(i)
        t = torch.randn(shape, generator=g).to(dtype)
        if changed:
            n = t.numel() // 100
            t.view(-1)[:n] += 1.0
        return t

    def dtensors(local):
        return {k: DTensor.from_local(v, mesh, [Shard(0)], run_check=False,
                                      shape=torch.Size(shape),
                                      stride=(COLS, 1))
                for k, v in local.items()}

    def drop_cache(path):
        os.sync()
        for root, _, files in os.walk(path):
            for f in files:
                fd = os.open(os.path.join(root, f), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)

    def timed(key, fn):
        # The previous writer's data written back first (its writeback
        # would run into this timing), then, for a cold load, this
        # writer's files out of the page cache.
        if rank == 0:
            os.sync()
            if args.cold and mode == "load":
                drop_cache(where[key.removesuffix("_into")])
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        dist.barrier()
        out[f"{key}_s"] = time.perf_counter() - t0

    out = {}
    lo, hi = my_rows(rows, rank, world)
    if mode in ("save", "change"):
        step = 1 if mode == "save" else 2
        state = {f"t{i}": full(i, mode == "change")[lo:hi].clone()
                 for i in range(TENSORS)}

        def torch_save():
            f = os.path.join(where["torch"], f"rank{rank}.pt")
            torch.save(state, f)
            with open(f, "rb+") as fh:
                os.fsync(fh.fileno())

        timed("torch", torch_save)
        shards = {k: hystate.Shard(v, [lo, 0], shape) for k, v in state.items()}
        timed("hy", lambda: hystate.save(where["hy"], shards))
        dts = dtensors(state)
        timed("dcp_fs", lambda: dcp.save(
            dts, storage_writer=dcp.FileSystemWriter(
                os.path.join(where["dcp_fs"], f"step-{step}"))))
        timed("dcp_hy", lambda: dcp.save(
            dts, storage_writer=HyStorageWriter(where["dcp_hy"])))
    else:  # load under another sharding
        old = args.saved_ranks

        def targets(into):
            # Fresh (torch.empty: each loader faults its pages in) or a
            # model's tensors in use (touched, as load_state_dict finds
            # them).
            make = torch.ones if into else torch.empty
            return {f"t{i}": make(hi - lo, COLS, dtype=dtype)
                    for i in range(TENSORS)}

        for into in (False, True):
            sfx = "_into" if into else ""
            got = targets(True) if into else {}

            def torch_load():
                for r in range(old):
                    olo, ohi = my_rows(rows, r, old)
                    if ohi <= lo or olo >= hi:
                        continue
                    part = torch.load(
                        os.path.join(where["torch"], f"rank{r}.pt"))
                    if (olo, ohi) == (lo, hi) and not into:
                        got.update(part)  # The same sharding: as loaded.
                        continue
                    for k, v in part.items():
                        a, b = max(lo, olo), min(hi, ohi)
                        got.setdefault(k, torch.empty(hi - lo, COLS,
                                                      dtype=dtype))[
                            a - lo:b - lo] = v[a - olo:b - olo]

            timed("torch" + sfx, torch_load)
            hy_targets = {k: hystate.Shard(v, [lo, 0], shape)
                          for k, v in targets(into).items()}
            timed("hy" + sfx, lambda: hystate.load(where["hy"], hy_targets))
            fs_state = dtensors(targets(into))
            timed("dcp_fs" + sfx, lambda: dcp.load(
                fs_state, storage_reader=dcp.FileSystemReader(
                    os.path.join(where["dcp_fs"], "step-2"))))
            hy_state = dtensors(targets(into))
            timed("dcp_hy" + sfx, lambda: dcp.load(
                hy_state, storage_reader=HyStorageReader(where["dcp_hy"])))
            for i in range(TENSORS):
                k = f"t{i}"
                want = full(i, True)[lo:hi]
                for who, t in (("torch", got[k]), ("hy", hy_targets[k].tensor),
                               ("DCP FS", fs_state[k].to_local()),
                               ("hystate.dcp", hy_state[k].to_local())):
                    if not torch.equal(t, want):
                        raise SystemExit(
                            f"rank {rank}: {who} loaded {k} wrong{sfx}")
            del got, hy_targets, fs_state, hy_state
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.destroy_process_group()


def run(mode, work, world, args, saved_ranks=0, cold=False):
    port = free_port()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--rank-mode", mode, "--work", work,
         "--rank", str(r), "--world", str(world), "--gib", str(args.gib),
         "--saved-ranks", str(saved_ranks), "--dtype", args.dtype]
        + (["--cold"] if cold else []),
        stdout=subprocess.PIPE, env=env, text=True) for r in range(world)]
    result = None
    failed = []
    for r, p in enumerate(procs):
        out, _ = p.communicate()
        if p.returncode != 0:
            failed.append(f"rank {r}: exit {p.returncode}")
        for line in out.splitlines():
            if line.startswith("{"):
                result = json.loads(line)
    if failed:
        raise SystemExit(f"{mode}: " + "; ".join(failed))
    return result


def once(args, mb):
    """One save, changed save, warm load and cold load of every writer, in
    a fresh directory; returns the rows of WRITERS."""
    work = tempfile.mkdtemp(prefix="hy-pybench-", dir=args.dir)
    where = dirs(work)
    os.makedirs(where["torch"])
    try:
        first = run("save", work, args.ranks, args)
        disk = {k: du(d) for k, d in where.items()}
        second = run("change", work, args.ranks, args)
        disk2 = {k: du(d) for k, d in where.items()}
        run("load", work, args.load_ranks, args, args.ranks)  # See above.
        load = run("load", work, args.load_ranks, args, args.ranks)
        cold = run("load", work, args.load_ranks, args, args.ranks, cold=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for who, label in WRITERS:
        rows.append({
            "key": who,
            "writer": label,
            "save_mb_s": mb / first[f"{who}_s"],
            "second_save_s": second[f"{who}_s"],
            "load_reshard_mb_s": mb / load[f"{who}_s"],
            "cold_load_reshard_mb_s": mb / cold[f"{who}_s"],
            "load_into_mb_s": mb / load[f"{who}_into_s"],
            "cold_load_into_mb_s": mb / cold[f"{who}_into_s"],
            "disk_mb_after_first": disk[who] / 1e6,
            "disk_mb_after_second": disk2[who] / 1e6,
        })
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--load-ranks", type=int, default=3)
    ap.add_argument("--processes", type=int, default=0,
                    help="save and load on this many processes")
    ap.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rank-mode", dest="mode", default=None)
    ap.add_argument("--work")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--saved-ranks", type=int, default=0)
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run it this many times; report medians")
    args = ap.parse_args()
    if args.mode:
        return rank_main(args)
    if args.processes:
        args.ranks = args.load_ranks = args.processes
    mb = args.gib * (1 << 30) / 1e6
    runs = [once(args, mb) for _ in range(args.repeat)]
    rows = [{k: (v if isinstance(v, str) else
                 statistics.median(run[i][k] for run in runs))
             for k, v in runs[0][i].items()} for i in range(len(WRITERS))]
    if args.json:
        print(json.dumps({"state_mb": mb, "dtype": args.dtype,
                          "ranks": args.ranks, "load_ranks": args.load_ranks,
                          "repeat": args.repeat, "rows": rows}, indent=2))
        return
    print(f"state {mb:.0f} MB {args.dtype} on {args.ranks} ranks, loaded on "
          f"{args.load_ranks}; durable saves; median of {args.repeat} "
          "run(s) (torch.save overwrites its files; the others keep both "
          "steps)")
    head = ("writer", "save MB/s", "2nd save s (1% changed)",
            "load+reshard MB/s warm", "cold", "into tensors in use: warm",
            "cold", "disk MB", "disk MB after 2nd")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['writer']} | {r['save_mb_s']:.0f} | "
              f"{r['second_save_s']:.2f} | {r['load_reshard_mb_s']:.0f} | "
              f"{r['cold_load_reshard_mb_s']:.0f} | "
              f"{r['load_into_mb_s']:.0f} | {r['cold_load_into_mb_s']:.0f} | "
              f"{r['disk_mb_after_first']:.0f} | "
              f"{r['disk_mb_after_second']:.0f} |")
    by = {who: r for (who, _), r in zip(WRITERS, rows)}

    def ratio(a, b):
        x, y = by[a], by[b]
        return (f"save {x['save_mb_s'] / y['save_mb_s']:.2f}x, 2nd save "
                f"{y['second_save_s'] / x['second_save_s']:.2f}x faster, load "
                f"{x['load_reshard_mb_s'] / y['load_reshard_mb_s']:.2f}x "
                "warm, "
                f"{x['cold_load_reshard_mb_s'] / y['cold_load_reshard_mb_s']:.2f}"
                "x cold (into tensors in use: "
                f"{x['load_into_mb_s'] / y['load_into_mb_s']:.2f}x warm, "
                f"{x['cold_load_into_mb_s'] / y['cold_load_into_mb_s']:.2f}x "
                "cold), disk after 2nd "
                f"{x['disk_mb_after_second'] / y['disk_mb_after_second']:.2f}"
                "x")

    print(f"hystate.save / torch.save: {ratio('hy', 'torch')}")
    print(f"hystate.dcp / DCP FileSystemWriter: {ratio('dcp_hy', 'dcp_fs')}")


if __name__ == "__main__":
    main()
