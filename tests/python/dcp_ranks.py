"""One rank of tests/python/test_dcp.py: DTensors over gloo on CPU.

    python3 dcp_ranks.py save|load DIR RANK WORLD PORT
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from hy.dcp import HyStorageReader, HyStorageWriter


def reference():
    g = torch.Generator().manual_seed(5)
    return {"w": torch.randn(96, 64, generator=g),
            "b": torch.randn(300, generator=g).to(torch.bfloat16)}


def main():
    mode, path, rank, world, port = sys.argv[1:6]
    rank, world = int(rank), int(world)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    ref = reference()
    if mode == "save":
        sd = {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in ref.items()}
        sd["step"] = 12
        dcp.save(sd, storage_writer=HyStorageWriter(path))
        print(json.dumps({"ok": True}))
    else:
        sd = {k: distribute_tensor(torch.zeros_like(v), mesh, [Shard(0)])
              for k, v in ref.items()}
        sd["step"] = 0
        dcp.load(sd, storage_reader=HyStorageReader(path))
        for k, v in ref.items():
            full = sd[k].full_tensor()
            a, b = full, v
            if a.dtype == torch.bfloat16:
                a, b = a.view(torch.int16), b.view(torch.int16)
            assert torch.equal(a, b), k
        assert sd["step"] == 12, sd["step"]
        print(json.dumps({"ok": True}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
