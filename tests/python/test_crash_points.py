"""Every crash point of hystate.save's commit on 2 ranks (hy/_crash.py's test
hook, HY_TEST_CRASH_AT): the process dies there as a kill -9 would, the
other rank is killed too if it has not ended, and then a fresh process
loads. The newest step the coordinator decided must load, bit for bit,
even where a rank died before copying the decision (its part is prepared,
not committed, and no reader writes); a step nobody decided must be
invisible; and the next save settles what was left and commits.

(hystate.dcp's points are in test_dcp.py; the trainer's commit, over the
transport, in the C++ tests.) Run by CTest (python.crash_points) against
the pip-installed package.
"""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

import hystate
from hystate import _crash, _hy

N = 4096  # Elements per rank.

RANK = r"""
import os, sys, torch, hystate
path, step, value = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
piece = torch.arange(rank * %(n)d, (rank + 1) * %(n)d,
                     dtype=torch.float32) + value
hystate.save(path, {"w": hystate.Shard(piece, [rank * %(n)d], [world * %(n)d]),
               "meta": {"value": value}}, step=step)
print("saved", step, flush=True)
""" % {"n": N}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def save(path, step, value, crash=None, world=2):
    """Runs a `world`-rank hystate.save of step `step`; with `crash`, once a rank
    has died at it the others get 5 s to end and are then killed, as a job
    that lost a process is. Returns each rank's exit code."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(),
               WORLD_SIZE=str(world))
    if crash:
        env["HY_TEST_CRASH_AT"] = crash
    procs = [subprocess.Popen(
        [sys.executable, "-c", RANK, path, str(step), str(value)],
        env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
        for r in range(world)]
    deadline = time.time() + 120
    crashed_at = None
    while time.time() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if crashed_at is None and _crash.EXIT_CODE in codes:
            crashed_at = time.time()
        if crashed_at is not None and time.time() > crashed_at + 5:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    return [p.returncode for p in procs]


def expected(step, value, world=2):
    return torch.arange(0, world * N, dtype=torch.float32) + value


def load(path):
    """The newest step as a fresh process's hystate.load gives it."""
    target = {"w": torch.zeros(2 * N), "meta": {"value": -1.0}}
    step = hystate.load(path, target)
    return step, target


def unsettled(path):
    cp = hystate.open(path)
    return [(s, v["version"]) for s in cp.stores()
            for v in _hy.Store(s).versions()
            if v["prepared"] and not v["committed"] and not v["aborted"]]


# (point, the rank it kills ("" every rank), the step a reader must load).
POINTS = [
    ("save.prepared", "", 0),    # Nobody voted: step 1 is invisible.
    ("save.prepared", "0", 0),   # The coordinator died before deciding.
    ("save.prepared", "1", 0),   # A rank died before voting.
    ("save.decided", "", 1),     # Rank 0 decided; rank 1 never heard it.
    ("save.before_follow", "", 1),  # Rank 1 heard it, did not commit.
    ("save.followed", "", 1),    # Rank 1 committed, then died.
]


@pytest.mark.parametrize("point,rank,want", POINTS,
                         ids=[f"{p}:{r or 'all'}" for p, r, _ in POINTS])
def test_hy_save_crash_point_leaves_the_decided_step_loadable(
        tmp_path, point, rank, want):
    path = str(tmp_path / "ckpt")
    assert save(path, 0, 0.0) == [0, 0]
    codes = save(path, 1, 0.5, crash=f"{point}:{rank}" if rank else point)
    assert _crash.EXIT_CODE in codes, codes
    step, got = load(path)
    assert step == want, (point, rank, codes)
    assert torch.equal(got["w"], expected(want, 0.5 * want))
    assert got["meta"] == {"value": 0.5 * want}
    if want == 1 and point != "save.followed":
        # Rank 1's part is still prepared only: the reader wrote nothing.
        assert unsettled(path), "the crash left nothing to settle"
    # The next save settles what was left and commits the step after.
    assert save(path, 2, 2.0) == [0, 0]
    assert unsettled(path) == []
    assert hystate.open(path).steps() == ([0, 1, 2] if want == 1 else [0, 2])
    step, got = load(path)
    assert step == 2 and torch.equal(got["w"], expected(2, 2.0))
    hystate.open(path).verify()
