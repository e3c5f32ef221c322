"""FSDP2 with torch.distributed.checkpoint (DCP), stored by hystate: each
rank writes only its own shards, a step commits on every rank or on none,
unchanged chunks are not written again, and any number of ranks loads it.

    torchrun --nproc-per-node 2 examples/fsdp2_dcp.py --dir /tmp/dcp

Trains a small model for 3 Adam steps, saves model and optimizer state
through hystate.dcp.HyStorageWriter, builds a fresh model (other initial
values), loads the step back through HyStorageReader and checks that every
parameter is what was saved. CPU and gloo here; on GPUs use nccl.
"""

import argparse
import os
import sys
from typing import Any, Dict, Tuple

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                     set_state_dict)
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import hystate
from hystate.dcp import HyStorageReader, HyStorageWriter


def build(seed: int,
          mesh: DeviceMesh) -> Tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def whole(t: Any) -> torch.Tensor:
    """A parameter's whole value (FSDP2 keeps DTensor shards)."""
    assert isinstance(t, DTensor), type(t)
    return t.full_tensor()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="hystate run root")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))

    model, opt = build(seed=0, mesh=mesh)
    for step in range(3):
        g = torch.Generator().manual_seed(100 * step + rank)
        loss = model(torch.randn(8, 16, generator=g)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    msd, osd = get_state_dict(model, opt)
    dcp_save({"model": msd, "optim": osd},
             storage_writer=HyStorageWriter(a.dir))
    saved = {k: whole(v) for k, v in msd.items()}

    fresh, fresh_opt = build(seed=1, mesh=mesh)
    msd2, osd2 = get_state_dict(fresh, fresh_opt)
    state: Dict[str, Any] = {"model": msd2, "optim": osd2}
    dcp_load(state, storage_reader=HyStorageReader(a.dir))
    set_state_dict(fresh, fresh_opt, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    got, _ = get_state_dict(fresh, fresh_opt)
    for name, t in got.items():
        assert torch.equal(whole(t), saved[name]), name
    if rank == 0:
        steps = hystate.open(a.dir).steps()
        print(f"{world} ranks: saved and loaded step {steps[-1]} of "
              f"{a.dir} ({len(saved)} parameters, bit for bit)")
    dist.destroy_process_group()
    # PyTorch 2.13's interpreter teardown after FSDP2 over gloo aborts now
    # and then ("terminate called without an active exception": 6 runs in
    # 20 of this script with DCP's own FileSystemWriter and no hystate at
    # all). Everything is saved, loaded and checked by now: leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
