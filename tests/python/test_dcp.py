"""hy.dcp with torch.distributed.checkpoint (PyTorch >= 2.0): 4 ranks save
DTensor shards through HyStorageWriter, 3 ranks load them under another
sharding through HyStorageReader, bit for bit; a second save writes only
what changed. Skips on Debian's torch 1.13 (no usable DCP); runs where
PyTorch >= 2.0 is installed (scripts/py-check.sh on the GPU machine)."""

import os
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
    from test_hy import run_ranks
    return run_ranks(mode, path, world, timeout=300, script="dcp_ranks.py")


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
