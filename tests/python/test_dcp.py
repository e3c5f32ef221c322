"""hystate.dcp under torch.distributed.checkpoint (DCP), as users run it: a
model wrapped with PyTorch's FSDP2 (fully_shard: DTensor parameters and
Adam state, f32 and bf16, shapes that split unevenly and leave ranks
empty) on 4 CPU ranks over gloo is dcp.save()d through HyStorageWriter and
dcp.load()ed by 3 ranks into their own FSDP2 model through HyStorageReader,
bit for bit; the same state through DCP's own FileSystemWriter/Reader is
the reference (same values). A save killed mid-way leaves the previous
step loadable and the next save commits; a damaged chunk or metadata file
raises.

The ranks are tests/python/dcp_ranks.py (one process forks them after its
imports). Run by CTest (python.dcp) against the pip-installed package
(PYTHONPATH=<build>/python-installed).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
import torch

fsdp = pytest.importorskip("torch.distributed.fsdp")
if not hasattr(fsdp, "fully_shard"):
    pytest.skip(f"torch {torch.__version__} has no "
                "torch.distributed.fsdp.fully_shard (FSDP2)",
                allow_module_level=True)

import hystate  # noqa: E402
from hystate import _hy  # noqa: E402
from hystate.dcp import HyStorageReader  # noqa: E402
from damage import flip_table_files  # noqa: E402

RANKS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "dcp_ranks.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def launch(mode, work, world, timeout=240, **env):
    """Runs `world` ranks of dcp_ranks.py; returns (exit codes, every rank's
    JSON line in rank order, stderr)."""
    p = subprocess.Popen(
        [sys.executable, RANKS, mode, str(work), str(world), free_port()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        env=dict(os.environ, OMP_NUM_THREADS="1",
                 **{k: str(v) for k, v in env.items()}))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # The launcher and its ranks.
        out, err = p.communicate()
        raise AssertionError(f"{mode} on {world} ranks ({env}) did not end "
                             f"in {timeout} s:\n{out}\n{err[-6000:]}")
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    exits = [l["exits"] for l in lines if "exits" in l]
    assert exits, (f"{mode} on {world} ranks: no exit report (launcher exit "
                   f"{p.returncode}):\n{out}\n{err[-6000:]}")
    ranks = sorted((l for l in lines if "rank" in l), key=lambda l: l["rank"])
    return exits[0], ranks, err


def run_ok(mode, work, world, **env):
    exits, ranks, err = launch(mode, work, world, **env)
    assert exits == [0] * world, \
        f"{mode} on {world} ranks ({env}) failed: exits {exits}\n{err[-8000:]}"
    assert [r["rank"] for r in ranks] == list(range(world)), ranks
    return ranks


def committed_steps(work):
    return hystate.open(os.path.join(work, "hy")).steps()


def unsettled(work):
    """(store, version) of parts prepared but neither committed nor
    aborted."""
    cp = hystate.open(os.path.join(work, "hy"))
    return [(s, v["version"]) for s in cp.stores()
            for v in _hy.Store(s).versions()
            if v["prepared"] and not v["committed"] and not v["aborted"]]


def check_loaded(ranks, want_tensors, fs=False):
    for r in ranks:
        assert r["compared"] == want_tensors, r
        # The fresh model differed from the saved state before the load.
        assert r["differs_before"] > 0, r
        assert r["mismatches"] == [], r
        if fs:
            # The reference itself: DCP's own files give the saved values.
            assert r["fs_mismatches"] == [], r
            assert r["hy_vs_fs"] == [], r


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Step 0 of an FSDP2 model after one Adam step, saved on 4 ranks
    through hystate.dcp (work/hy) and DCP's FileSystemWriter (work/fs-1); the
    full tensors in work/ref-1.pt."""
    work = tmp_path_factory.mktemp("dcp")
    ranks = run_ok("save", work, 4, STEPS=1, FS=1)
    info = ranks[0]
    assert info["sharded"] > 0 and info["bf16"] > 0, info
    assert all(r["tensors"] == info["tensors"] for r in ranks), ranks
    return str(work), info["tensors"]


def test_fsdp2_saved_on_four_ranks_loads_on_three_bitwise(saved):
    work, tensors = saved
    assert committed_steps(work) == [0]
    assert len(hystate.open(os.path.join(work, "hy")).stores()) == 4
    # Loads through hystate.dcp and through FileSystemReader, each into its own
    # FSDP2 model on 3 ranks; compares both with what the savers held.
    ranks = run_ok("load", work, 3, STEPS=1, FS=1)
    check_loaded(ranks, tensors, fs=True)


def full_tensors(work, steps):
    return torch.load(os.path.join(work, f"ref-{steps}.pt"),
                      weights_only=False)["tensors"]


def test_killed_save_leaves_previous_step_and_next_save_commits(
        saved, tmp_path):
    src, tensors = saved
    work = str(tmp_path)
    shutil.copytree(os.path.join(src, "hy"), os.path.join(work, "hy"))
    shutil.copy(os.path.join(src, "ref-1.pt"), work)
    # Step 1 (after a second Adam step): the ranks SIGKILL themselves in
    # HyStorageWriter.write_data, even ranks (the coordinator too) before
    # writing, odd ones after preparing their part.
    exits, _, err = launch("save", work, 4, STEPS=2, KILL=1)
    assert exits == [-signal.SIGKILL] * 4, f"exits {exits}\n{err[-6000:]}"
    assert committed_steps(work) == [0]
    assert unsettled(work), "the killed save prepared no part"
    new, old = full_tensors(work, 2), full_tensors(work, 1)
    assert any(not torch.equal(new[k], old[k]) for k in old)
    ranks = run_ok("load", work, 3, STEPS=1)  # Step 0's values, bitwise.
    check_loaded(ranks, tensors)
    # The next save settles the killed one's parts and commits step 1.
    run_ok("save", work, 4, STEPS=2)
    assert committed_steps(work) == [0, 1]
    assert unsettled(work) == []
    # The newest step, and step 0 asked for by number: each bitwise.
    ranks = run_ok("load", work, 3, STEPS=2, OLD_STEP=0, OLD_STEPS=1)
    check_loaded(ranks, tensors)
    assert all(r["old_mismatches"] == [] for r in ranks), ranks


@pytest.mark.parametrize("point", ["dcp.decided", "dcp.copied"])
def test_crash_after_the_decision_leaves_the_new_step_loadable(
        saved, tmp_path, point):
    """The coordinator dies in finish() after its own store committed
    (the decision), before or while copying it into the others' stores
    (hy/_crash.py's HY_TEST_CRASH_AT): the new step loads at once, bit for
    bit, although some parts are only prepared; the next save settles
    them."""
    src, tensors = saved
    work = str(tmp_path)
    shutil.copytree(os.path.join(src, "hy"), os.path.join(work, "hy"))
    shutil.copy(os.path.join(src, "ref-1.pt"), work)
    exits, _, err = launch("save", work, 4, STEPS=2,
                           HY_TEST_CRASH_AT=f"{point}:0")
    assert exits[0] == 86, f"exits {exits}\n{err[-6000:]}"
    assert unsettled(work), "the coordinator copied every decision"
    ranks = run_ok("load", work, 3, STEPS=2)  # Step 1's values, bitwise.
    check_loaded(ranks, tensors)
    run_ok("save", work, 4, STEPS=3)
    assert committed_steps(work) == [0, 1, 2]
    assert unsettled(work) == []


def test_damaged_chunk_raises_never_loads(saved, tmp_path):
    src, _ = saved
    work = str(tmp_path)
    shutil.copytree(os.path.join(src, "hy"), os.path.join(work, "hy"))
    shutil.copy(os.path.join(src, "ref-1.pt"), work)
    # As test_hy.py's test_corrupted_chunk_is_data_loss: flip bytes in the
    # middle of every large table file of every rank's store.
    flipped = flip_table_files(hystate.open(os.path.join(work, "hy")).stores())
    assert flipped > 0, "no table file large enough to damage"
    exits, ranks, err = launch("load", work, 3, STEPS=1, DAMAGED=1)
    assert exits == [0] * 3, f"exits {exits}\n{err[-6000:]}"
    for r in ranks:
        assert r["error_types"], f"rank {r['rank']} loaded a damaged " \
            f"checkpoint without an error: {r}"
        # DCP's CheckpointException carries each rank's hystate.DataLoss.
        assert "DataLoss" in r["error_types"], r
        assert "hystate.DataLoss" in r["error"], r


def test_damaged_metadata_raises(saved, tmp_path):
    src, _ = saved
    work = str(tmp_path / "hy")
    shutil.copytree(os.path.join(src, "hy"), work)
    meta_dir = os.path.join(work, "dcp")
    names = os.listdir(meta_dir)
    assert len(names) == 1 and names[0].endswith(".metadata"), names
    reader = HyStorageReader(work)
    metadata = reader.read_metadata()
    assert any(k.startswith("model.") for k in metadata.state_dict_metadata)
    f = os.path.join(meta_dir, names[0])
    data = bytearray(open(f, "rb").read())
    data[len(data) // 2] ^= 0x01  # One bit of DCP's pickled Metadata.
    open(f, "wb").write(bytes(data))
    with pytest.raises(hystate.DataLoss, match="checksum"):
        HyStorageReader(work).read_metadata()
