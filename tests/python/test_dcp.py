"""hy.dcp with torch.distributed.checkpoint (PyTorch >= 2.0): 4 ranks save
DTensor shards through HyStorageWriter, 3 ranks load them under another
sharding through HyStorageReader, bit for bit; a second save writes only
what changed. Skips on Debian's torch 1.13 (no usable DCP); runs where
PyTorch >= 2.0 is installed (scripts/py-check.sh on the GPU machine)."""

import json
import os
import subprocess
import sys

import pytest
import torch

MAJOR = int(torch.__version__.split(".")[0])
pytestmark = pytest.mark.skipif(
    MAJOR < 2,
    reason=f"hy.dcp needs PyTorch >= 2.0 (torch.distributed.checkpoint); "
           f"this is torch {torch.__version__}")

HERE = os.path.dirname(os.path.abspath(__file__))


def run(mode, path, world):
    sys.path.insert(0, HERE)
    from test_hy import free_port
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, os.path.join(HERE, "dcp_ranks.py"), mode, path,
         str(r), str(world), port], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for r in range(world)]
    outs = []
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"{mode} rank {r}:\n{out}\n{err}"
        outs.append([json.loads(l) for l in out.splitlines()
                     if l.startswith("{")])
    return outs


def test_dcp_save_on_four_load_on_three(tmp_path):
    path = str(tmp_path / "ckpt")
    run("save", path, 4)
    loaded = run("load", path, 3)
    assert all(o[-1]["ok"] for o in loaded)
    import hy
    assert hy.open(path).versions() == [0]
    second = run("save", path, 4)  # Same state: nothing new to write.
    assert hy.open(path).versions() == [0, 1]
    assert all(o[-1]["ok"] for o in run("load", path, 3))
