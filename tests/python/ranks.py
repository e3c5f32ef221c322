"""One rank of a multi-process hy test (tests/python/test_hy.py starts
them): torch.distributed over gloo on 127.0.0.1.

    python3 ranks.py MODE DIR RANK WORLD PORT

Modes:
  save      saves this rank's row Shards of the reference state (step 0)
  change    saves it again with a contiguous 1% of "big" changed (step 1);
            prints the total bytes the save wrote, from rank 0
  load      loads the newest step as column Shards (another sharding) and
            checks them bit for bit against the reference
  badshard  rank 1 saves a Shard that does not fit its global shape
"""

import json
import os
import sys

import torch
import torch.distributed as dist

import hystate

SHAPES = {"big": (2048, 1024), "bias": (1000,), "half": (96, 40)}


def reference(name, changed=False):
    """The global tensor `name`, the same in every process."""
    g = torch.Generator().manual_seed(sorted(SHAPES).index(name) + 11)
    t = torch.randn(SHAPES[name], generator=g)
    if name == "half":
        t = t.to(torch.bfloat16)
    if changed and name == "big":
        n = t.numel() // 100  # 1%, contiguous.
        t.view(-1)[1000:1000 + n] += 1.0
    return t


def bits(t):
    """The tensor's bytes (bitwise comparison, bf16 included)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def rows(t, rank, world):
    """Rank's rows of `t` (dim 0 split as evenly as possible)."""
    lo = t.shape[0] * rank // world
    hi = t.shape[0] * (rank + 1) // world
    return t[lo:hi].clone(), [lo] + [0] * (t.dim() - 1)


def main():
    mode, path, rank, world, port = sys.argv[1:6]
    rank, world = int(rank), int(world)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if mode in ("save", "change"):
        state = {"meta": {"epoch": 3, "name": "ref"}}
        for name in SHAPES:
            local, offsets = rows(reference(name, mode == "change"), rank,
                                  world)
            state[name] = hystate.Shard(local, offsets, SHAPES[name])
        handle = hystate.save_async(path, state, chunk_bytes=256 << 10)
        step = handle.wait()
        if rank == 0:
            print(json.dumps({"step": step,
                              "new_bytes": handle.stats["total_new_bytes"]}))
    elif mode == "load":
        state = {"meta": {"epoch": 0, "name": ""}}
        for name in SHAPES:
            ref = reference(name, changed=os.environ.get("CHANGED") == "1")
            # Columns instead of rows (1-d: a flat range).
            d = ref.dim() - 1
            lo = ref.shape[d] * rank // world
            hi = ref.shape[d] * (rank + 1) // world
            target = torch.zeros_like(ref.narrow(d, lo, hi - lo).contiguous())
            offsets = [0] * ref.dim()
            offsets[d] = lo
            state[name] = hystate.Shard(target, offsets, SHAPES[name])
        step = hystate.load(path, state)
        for name in SHAPES:
            ref = reference(name, os.environ.get("CHANGED") == "1")
            s = state[name]
            d = ref.dim() - 1
            want = ref.narrow(d, s.offsets[d], s.tensor.shape[d])
            assert bits(s.tensor) == bits(want), f"rank {rank}: {name} differs"
        assert state["meta"] == {"epoch": 3, "name": "ref"}, state["meta"]
        print(json.dumps({"rank": rank, "step": step, "ok": True}))
    elif mode == "badshard":
        local = torch.zeros(4, 4)
        try:
            # Rank 1's box does not fit; every rank must refuse.
            hystate.save(path, {"w": hystate.Shard(local, [rank * 14, 0], [16, 4])})
        except hystate.InvalidArgument as e:
            print(json.dumps({"rank": rank, "error": str(e), "code": e.code}))
        else:
            print(json.dumps({"rank": rank, "error": None}))
    # Always: a process group left alive at exit can abort the interpreter
    # ("terminate called without an active exception" from gloo's threads).
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
