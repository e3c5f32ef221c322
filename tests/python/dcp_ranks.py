"""The ranks of tests/python/test_dcp.py: a small model wrapped with PyTorch's
FSDP2 (fully_shard: DTensor parameters and Adam state) over gloo on CPU,
saved and loaded through torch.distributed.checkpoint.

    python3 dcp_ranks.py MODE WORK WORLD PORT   (forks the WORLD ranks)

WORK holds hy/ (hystate.dcp's run root), fs-<step>/ (DCP's FileSystemWriter
checkpoints) and ref-<step>.pt (the full tensors and values the savers
held, written by rank 0 with torch.save). Modes, set by environment:

  save  trains STEPS Adam steps, then dcp.save()s model + optimizer state
        (get_state_dict) through hystate.dcp (into WORK/hy) and, with FS=1, DCP's
        FileSystemWriter (into WORK/fs-STEPS); first rank 0 writes
        ref-STEPS.pt. With KILL=1 the ranks SIGKILL themselves inside
        HyStorageWriter.write_data: even ranks (the coordinator too)
        before writing their part, odd ranks after preparing it, so the
        save never finishes.
  load  builds its own FSDP2 model (other initial values), dcp.load()s
        into it through hystate.dcp, set_state_dict()s it, and compares every
        full tensor bit for bit with ref-STEPS.pt; with FS=1 it does the
        same through FileSystemReader from fs-STEPS and compares the two
        loads with each other. With OLD_STEP=s OLD_STEPS=n it also loads
        hy step s (HyStorageReader(step=s)) and compares it with
        ref-n.pt. With DAMAGED=1 the hy load is expected to
        raise: the rank prints what it raised (or what it loaded).

The launcher prints each rank's result as a JSON line (the test asserts on
them).
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                     set_state_dict)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from hystate.dcp import HyStorageReader, HyStorageWriter


class Net(nn.Module):
    """Layers of both dtypes; shapes that 4 and 3 ranks split unevenly
    (250 rows: 63,63,63,61 / 84,84,82; 10 rows: 3,3,3,1 / 4,4,2) and one
    that leaves ranks empty (2 rows: 1,1,0,0 / 1,1,0)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 256)
        self.mid = nn.Linear(256, 250, dtype=torch.bfloat16)
        self.out = nn.Linear(250, 10)
        self.tiny = nn.Linear(10, 2)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        h = torch.relu(self.mid(h.to(torch.bfloat16)).float())
        return self.tiny(self.out(h))


def build(seed, mesh):
    torch.manual_seed(seed)
    model = Net()
    for layer in (model.inp, model.mid, model.out, model.tiny):
        fully_shard(layer, mesh=mesh)  # One dtype per FSDP group.
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, opt


def train(model, opt, steps, rank):
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(16, 64, generator=g)
        y = torch.randn(16, 2, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


def state_of(model, opt, steps):
    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd,
            "extra": {"train_steps": steps, "note": "hystate.dcp test"}}


def leaves(obj, prefix=""):
    """(name, value) of every leaf of nested dicts and lists."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{prefix}{k}/")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{prefix}{i}/")
    else:
        yield prefix.rstrip("/"), obj


def full(state):
    """The state's full tensors (DTensors gathered: collective) and its
    other values, by name."""
    tensors, objects = {}, {}
    for name, v in leaves(state):
        if isinstance(v, DTensor):
            tensors[name] = v.full_tensor().detach().clone()
        elif isinstance(v, torch.Tensor):
            tensors[name] = v.detach().clone()
        else:
            objects[name] = v
    return {"tensors": tensors, "objects": objects}


def bits(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def differences(got, want, what):
    """What differs between two full() results, bitwise, as messages."""
    out = []
    gt, wt = got["tensors"], want["tensors"]
    if set(gt) != set(wt):
        out.append(f"{what}: tensor names differ: only loaded "
                   f"{sorted(set(gt) - set(wt))}, only expected "
                   f"{sorted(set(wt) - set(gt))}")
    for name in sorted(set(gt) & set(wt)):
        a, b = gt[name], wt[name]
        if a.dtype != b.dtype or a.shape != b.shape:
            out.append(f"{what}: {name}: {a.dtype} {list(a.shape)}, expected "
                       f"{b.dtype} {list(b.shape)}")
        elif not torch.equal(bits(a), bits(b)):
            n = int((bits(a) != bits(b)).sum())
            out.append(f"{what}: {name}: {n} of {bits(b).numel()} bytes "
                       "differ")
    if got["objects"] != want["objects"]:
        out.append(f"{what}: values differ: {got['objects']} vs "
                   f"{want['objects']}")
    return out


class KilledWriter(HyStorageWriter):
    """Dies inside write_data: even ranks before writing, odd ranks after
    their part is prepared."""

    def write_data(self, plan, planner):
        if self.rank % 2 == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        fut = super().write_data(plan, planner)
        fut.wait()
        os.kill(os.getpid(), signal.SIGKILL)
        return fut


def error_types(e):
    """The exception types a (DCP-wrapped) failure carries."""
    types = [type(e).__name__]
    for exc, _ in getattr(e, "failures", {}).values():
        types.append(type(exc).__name__)
    cause = e.__cause__ or e.__context__
    while cause is not None:
        types.append(type(cause).__name__)
        cause = cause.__cause__ or cause.__context__
    return types


def rank_main(mode, work, rank, world, port):
    steps = int(os.environ["STEPS"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    hy_dir = os.path.join(work, "hy")
    fs_dir = os.path.join(work, f"fs-{steps}")
    ref_path = os.path.join(work, f"ref-{steps}.pt")
    fs = os.environ.get("FS") == "1"
    out = {"rank": rank}
    if mode == "save":
        model, opt = build(0, mesh)
        train(model, opt, steps, rank)
        state = state_of(model, opt, steps)
        ref = full(state)
        if rank == 0:
            torch.save(ref, ref_path)
        out["tensors"] = len(ref["tensors"])
        out["sharded"] = sum(isinstance(v, DTensor) for _, v in leaves(state))
        out["bf16"] = sum(t.dtype == torch.bfloat16
                          for t in ref["tensors"].values())
        dist.barrier()
        writer = KilledWriter if os.environ.get("KILL") == "1" \
            else HyStorageWriter
        dcp.save(state, storage_writer=writer(hy_dir))
        if fs:
            dcp.save(state, storage_writer=dcp.FileSystemWriter(fs_dir))
        out["ok"] = True
    elif mode == "load":
        want = torch.load(ref_path, weights_only=False)
        model, opt = build(100 + steps, mesh)
        state = state_of(model, opt, -1)
        before = full(state)
        out["differs_before"] = len(differences(before, want, "before"))
        if os.environ.get("DAMAGED") == "1":
            try:
                dcp.load(state, storage_reader=HyStorageReader(hy_dir))
            except BaseException as e:  # CheckpointException is one.
                out["error_types"] = error_types(e)
                out["error"] = str(e)[-3000:]
            else:
                set_state_dict(model, opt, model_state_dict=state["model"],
                               optim_state_dict=state["optim"])
                got = full(state_of(model, opt, state["extra"]["train_steps"]))
                out["error_types"] = []
                out["loaded_mismatches"] = differences(got, want, "hy")
            dist.destroy_process_group()
            return out
        dcp.load(state, storage_reader=HyStorageReader(hy_dir))
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        # Read back from the model and optimizer, not from `state`.
        got = full(state_of(model, opt, state["extra"]["train_steps"]))
        out["compared"] = len(got["tensors"])
        out["mismatches"] = differences(got, want, "hystate.dcp vs saved")
        if fs:
            model2, opt2 = build(200 + steps, mesh)
            state2 = state_of(model2, opt2, -1)
            dcp.load(state2, storage_reader=dcp.FileSystemReader(fs_dir))
            set_state_dict(model2, opt2, model_state_dict=state2["model"],
                           optim_state_dict=state2["optim"])
            got2 = full(state_of(model2, opt2, state2["extra"]["train_steps"]))
            out["fs_mismatches"] = differences(got2, want,
                                               "FileSystemReader vs saved")
            out["hy_vs_fs"] = differences(got, got2, "hystate.dcp vs FileSystem")
        if "OLD_STEP" in os.environ:
            # An older hy step, asked for by number.
            old_steps = int(os.environ["OLD_STEPS"])
            old_want = torch.load(os.path.join(work, f"ref-{old_steps}.pt"),
                                  weights_only=False)
            model3, opt3 = build(300 + steps, mesh)
            state3 = state_of(model3, opt3, -1)
            dcp.load(state3, storage_reader=HyStorageReader(
                hy_dir, step=int(os.environ["OLD_STEP"])))
            set_state_dict(model3, opt3, model_state_dict=state3["model"],
                           optim_state_dict=state3["optim"])
            got3 = full(state_of(model3, opt3, state3["extra"]["train_steps"]))
            out["old_mismatches"] = differences(got3, old_want,
                                                "older hystate.dcp step vs saved")
        out["ok"] = True
    # Always: a process group left alive at exit can abort the interpreter.
    dist.destroy_process_group()
    return out


def main():
    """Forks the WORLD ranks (after the imports, which take most of a
    rank's time on a small machine) and waits for them; prints each rank's
    result as a JSON line, then their exit statuses as {"exits": [...]}
    (-9: SIGKILL); exits 1 if one failed."""
    mode, work, world, port = sys.argv[1:5]
    world = int(world)
    results = tempfile.mkdtemp(prefix="dcp-ranks-")
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                out = rank_main(mode, work, rank, world, port)
                with open(os.path.join(results, f"{rank}.json"), "w") as f:
                    json.dump(out, f)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        pids.append(pid)
    exits = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        exits.append(os.waitstatus_to_exitcode(status))
    for rank in range(world):
        f = os.path.join(results, f"{rank}.json")
        if os.path.exists(f):
            print(open(f).read())
    shutil.rmtree(results, ignore_errors=True)
    print(json.dumps({"exits": exits}), flush=True)
    sys.exit(0 if all(e == 0 for e in exits) else 1)


if __name__ == "__main__":
    main()
