"""The Python package hystate under PyPI's torch and numpy 2: multi-process saves
over real torch.distributed (gloo, 127.0.0.1), loads under another
sharding, incremental saves, a save killed with SIGKILL, bad input.

Run by CTest (python.*) against the package `pip install .` put in
<build>/python-installed (PYTHONPATH), never the build tree.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

import hystate
from damage import flip_table_files

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_ranks(mode, path, world, env=None, timeout=120, script="ranks.py"):
    """Runs `world` processes of `script` (ranks.py); returns every rank's
    parsed JSON lines."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.join(HERE, script), mode, path,
             str(r), str(world), port],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, **(env or {})))
        for r in range(world)
    ]
    outs = []
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"{mode} rank {r} failed:\n{out}\n{err}"
        outs.append([json.loads(l) for l in out.splitlines()
                     if l.startswith("{")])
    return outs


def test_four_ranks_save_three_ranks_load_another_sharding(tmp_path):
    path = str(tmp_path / "ckpt")
    saved = run_ranks("save", path, 4)
    assert saved[0][-1]["step"] == 0
    # 4 stores, one per saving rank, all committed at step 0.
    cp = hystate.open(path)
    assert len(cp.stores()) == 4
    assert cp.steps() == [0]
    assert cp.tensors()["half"] == ("BF16", [96, 40])
    loaded = run_ranks("load", path, 3)
    assert all(o[-1]["ok"] and o[-1]["step"] == 0 for o in loaded)
    assert all(n > 0 for n in cp.verify()[cp.stores()[0]].values())


def test_second_save_with_one_percent_changed_writes_only_changed_chunks(
        tmp_path):
    path = str(tmp_path / "ckpt")
    first = run_ranks("save", path, 4)[0][-1]
    second = run_ranks("change", path, 4)[0][-1]
    assert second["step"] == 1
    # The first save wrote everything (compressed); the second only the
    # chunks around the changed 1% of "big".
    assert first["new_bytes"] > 1_000_000
    assert second["new_bytes"] < 0.1 * first["new_bytes"], (first, second)
    loaded = run_ranks("load", path, 3, env={"CHANGED": "1"})
    assert all(o[-1]["step"] == 1 for o in loaded)


def test_kill_during_save_leaves_the_previous_version(tmp_path):
    path = str(tmp_path / "ckpt")
    big = torch.randn(64, 1 << 20)  # 256 MiB: the writing takes a while.
    hystate.save(path, {"x": big[:1].clone()}, step=0)
    # The child starts a save and is killed before its wait(), where ranks
    # commit: whether the background writing was still going on or had
    # prepared the version, step 1 must not be committed. (Killing a
    # blocking save after a fixed sleep raced a fast machine's commit.)
    script = (
        "import sys, torch, hystate\n"
        "x = torch.randn(64, 1 << 20)\n"
        f"h = hystate.save_async({path!r}, {{'x': x}}, step=1)\n"
        "print('saving', flush=True)\n"
        "sys.stdin.read()\n"
        "h.wait()\n")
    p = subprocess.Popen([sys.executable, "-c", script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "saving"
    time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    target = {"x": torch.zeros(1, 1 << 20)}
    assert hystate.load(path, target) == 0
    assert torch.equal(target["x"], big[:1])
    hystate.open(path).verify()
    # The next save settles what the killed one left and commits.
    assert hystate.save(path, {"x": big[:1] + 1}) == 1
    assert hystate.open(path).steps() == [0, 1]


def test_old_version_keywords_warn_and_mean_steps(tmp_path):
    """hy speaks of steps, as hyctl: version= (which meant a step) and
    Checkpoints.versions() still work for a release, with a
    DeprecationWarning, and give what step= and steps() give."""
    path = str(tmp_path / "ckpt")
    for step in (3, 7):
        hystate.save(path, {"w": torch.full((4,), float(step))}, step=step)
    cp = hystate.open(path)
    assert cp.steps() == [3, 7]
    with pytest.warns(DeprecationWarning, match=r"steps\(\)"):
        assert cp.versions() == [3, 7]
    target = {"w": torch.zeros(4)}
    assert hystate.load(path, target, step=3) == 3
    assert torch.equal(target["w"], torch.full((4,), 3.0))
    with pytest.warns(DeprecationWarning, match=r"hystate.load\(step=\)"):
        assert hystate.load(path, target, version=7) == 7
    assert torch.equal(target["w"], torch.full((4,), 7.0))
    with pytest.raises(hystate.InvalidArgument, match="disagree"):
        with pytest.warns(DeprecationWarning):
            hystate.load(path, target, step=3, version=7)
    assert cp.tensors(step=3) == {"w": ("F32", [4])}
    with pytest.warns(DeprecationWarning):
        assert cp.tensors(version=7) == cp.tensors(step=7)
    with pytest.raises(hystate.NotFound):
        cp.tensors(step=5)
    # The new names do not warn.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        hystate.load(path, target, step=3)
        cp.steps()
        cp.tensors(step=7)


def test_bad_input_raises_clear_errors_and_writes_nothing(tmp_path):
    path = str(tmp_path / "ckpt")
    outs = run_ranks("badshard", path, 2)
    for o in outs:
        assert o[-1]["code"] == "InvalidArgument"
        assert "does not fit the global shape" in o[-1]["error"]
        assert "rank 1" in o[-1]["error"]
    assert not os.path.exists(os.path.join(path, "node-0", "store")) or \
        hystate.open(path).steps() == []
    hystate.save(path, {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
                   "n": 5})
    with pytest.raises(hystate.InvalidArgument, match="saved as F32"):
        hystate.load(path, {"w": np.zeros((3, 4), dtype=np.float64)})
    with pytest.raises(hystate.InvalidArgument, match="shape"):
        hystate.load(path, {"w": np.zeros((4, 3), dtype=np.float32)})
    target = np.full((3, 4), 7, dtype=np.float32)
    with pytest.raises(hystate.NotFound, match="'missing'"):
        hystate.load(path, {"w": target, "missing": torch.zeros(2)})
    assert (target == 7).all()  # Checked before anything was written.
    with pytest.raises(hystate.NotFound):
        hystate.load(path, {"w": target}, step=9)
    with pytest.raises(hystate.InvalidArgument, match="neither a tensor"):
        hystate.save(path, {"f": object()})
    with pytest.raises(hystate.AlreadyExists):
        hystate.save(path, {"w": target}, step=0)
    with pytest.raises(hystate.InvalidArgument, match="contiguous"):
        hystate.load(path, {"w": torch.zeros(4, 3).t()})
    # A tensor off the CPU (meta here; CUDA alike) is refused, naming the
    # way that takes it (hystate.dcp copies shards to the host).
    with pytest.raises(hystate.InvalidArgument, match="hystate.dcp"):
        hystate.save(path, {"w": torch.zeros(3, 4, device="meta")})
    loaded = {"w": np.zeros((3, 4), dtype=np.float32), "n": 0}
    assert hystate.load(path, loaded) == 0
    assert loaded["n"] == 5 and loaded["w"][2, 3] == 11


def test_paths_are_named_as_hyctl_names_them(tmp_path):
    """hystate sees a directory through the same RunRoot as hyctl: a run
    root, a store inside one, nothing; and stores of two runs under one
    root are refused, naming both."""
    path = str(tmp_path / "ckpt")
    hystate.save(path, {"w": np.arange(6, dtype=np.float32)}, step=4)
    store = os.path.join(path, "node-0", "store")
    assert hystate._hy.path_kind(path) == "run_root"
    assert hystate._hy.path_kind(store) == "run_store"
    assert hystate._hy.path_kind(str(tmp_path / "none")) == "missing"
    assert hystate._hy.path_kind(str(tmp_path)) == "other"
    root = hystate._hy.RunRoot(path)
    assert root.nodes() == [0]
    assert [s["path"] for s in root.stores()] == [store]
    assert root.steps() == [4] and root.run_id() == ""
    with pytest.raises(hystate.InvalidArgument,
                       match="pass the run root " + path):
        hystate._hy.RunRoot(store)
    with pytest.raises(hystate.NotFound, match="no hy checkpoint"):
        hystate.load(store, {"w": np.zeros(6, dtype=np.float32)})
    # Another run's node directory copied in beside this run's.
    hystate._hy.Store(store, read_only=False, run_id="run-a")
    hystate._hy.Store(os.path.join(path, "node-1", "store"), create=True,
                      read_only=False, run_id="run-b")
    with pytest.raises(hystate.FailedPrecondition, match="run-a.*run-b"):
        hystate.open(path).steps()
    assert hystate._hy.RunRoot(path).steps(allow_other_run=True) == [4]


def test_corrupted_chunk_is_data_loss(tmp_path):
    path = str(tmp_path / "ckpt")
    hystate.save(path, {"w": torch.randn(256, 256)})
    # Flip bytes in the middle of every table file of the store.
    store = os.path.join(path, "node-0", "store")
    flipped = flip_table_files([store])
    if flipped == 0:
        pytest.skip("no table file large enough to damage")
    with pytest.raises(hystate.Error) as e:
        hystate.load(path, {"w": torch.zeros(256, 256)})
    assert e.value.code in ("DataLoss", "IOError"), e.value


def test_plan_matches_hyctl_plan(tmp_path):
    hyctl = os.environ.get("HYCTL")
    if not hyctl:
        pytest.skip("HYCTL (the hyctl binary) is not set")
    tensors = [
        ("model.embed_tokens.weight", "BF16", [1000, 256]),
        ("model.layers.0.self_attn.q_proj.weight", "BF16", [256, 256]),
        ("model.layers.0.mlp.down_proj.weight", "F32", [256, 512]),
    ]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps([{"name": n, "dtype": d, "shape": s}
                                for n, d, s in tensors]))
    out = subprocess.run([hyctl, "plan", "--model-spec", str(spec),
                          "--from", "fsdp=4", "--to", "tp=2,dp=2",
                          "--ranks-per-node", "2", "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    want = json.loads(out)
    got = hystate.plan(tensors, "fsdp=4", "tp=2,dp=2", ranks_per_node=2)
    for key in ("dst_bytes", "local_bytes", "cross_node_bytes",
                "max_send_bytes", "steps", "transfers"):
        assert got[key] == want[key], key
    assert f"{got['fingerprint']:016x}" == want["fingerprint"]
    with pytest.raises(hystate.InvalidArgument, match="layout"):
        hystate.plan(tensors, "fsdp=4", "tp=3")
    # Between worlds of different sizes, as hyctl plan: the larger world.
    for src, dst in [("fsdp=2", "tp=4"), ("tp=2,dp=2", "fsdp=1")]:
        out = subprocess.run([hyctl, "plan", "--model-spec", str(spec),
                              "--from", src, "--to", dst, "-o", "json"],
                             capture_output=True, text=True,
                             check=True).stdout
        want = json.loads(out)
        got = hystate.plan(tensors, src, dst)
        assert got["world_size"] == want["world_size"] == 4, (got, want)
        for key in ("dst_bytes", "cross_node_bytes", "steps", "transfers"):
            assert got[key] == want[key], (src, dst, key)


def write_safetensors(path, tensors):
    """A safetensors file (the format's own layout: u64 header length, JSON
    header, data) of f32 numpy arrays."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        assert h["dtype"] == "F32", h
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b],
                                  dtype="<f4").reshape(h["shape"])
    return out


def test_reshard_matches_hyctl_reshard(tmp_path):
    hyctl = os.environ.get("HYCTL")
    if not hyctl:
        pytest.skip("HYCTL (the hyctl binary) is not set")
    rng = np.random.default_rng(5)
    model = {
        "model.embed_tokens.weight": rng.standard_normal((64, 16)),
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((16, 16)),
        "model.layers.0.mlp.down_proj.weight": rng.standard_normal((16, 32)),
        "model.norm.weight": rng.standard_normal(16),
    }
    src = str(tmp_path / "model.safetensors")
    write_safetensors(src, model)
    store = str(tmp_path / "store")
    subprocess.run([hyctl, "import", store, "--safetensors", src],
                   check=True, capture_output=True)

    done = hystate.reshard(store, "tp=2,dp=2", version_id=1)
    assert done["version"] == 2 and done["world_size"] == 4, done
    assert done["tensors"] == 4 and done["new_chunks"] > 0, done
    out = str(tmp_path / "v2.safetensors")
    subprocess.run([hyctl, "export", store, "--version-id", "2",
                    "--safetensors", out], check=True, capture_output=True)
    back = read_safetensors(out)
    assert set(back) == set(model)
    for name, a in model.items():
        assert np.array_equal(back[name], a.astype("<f4")), name
    listed = subprocess.run([hyctl, "inspect", store], check=True,
                            capture_output=True, text=True).stdout
    assert "tp=2,dp=2" in listed, listed

    # hyctl reshard of the same version to the same layout cuts the same
    # shards: every chunk it writes is one hystate.reshard wrote already.
    r = subprocess.run([hyctl, "reshard", store, "--version-id", "1", "--to",
                        "tp=2,dp=2", "--new-version", "9"],
                       check=True, capture_output=True, text=True)
    assert "(0 of" in r.stdout, r.stdout
    assert hystate.reshard(store, "tp=2,dp=2", version_id=9)["new_chunks"] == 0

    # Bad input: nothing is committed.
    with pytest.raises(hystate.InvalidArgument):
        hystate.reshard(store, "tp=3", version_id=1)  # 16 rows do not split in 3.
    with pytest.raises(hystate.AlreadyExists):
        hystate.reshard(store, "tp=2", version_id=1, new_version_id=2)
    with pytest.raises(hystate.NotFound):
        hystate.reshard(store, "tp=2", version_id=77)
    versions = [v["version"] for v in hystate._hy.Store(store).versions()
                if v["committed"]]
    assert versions == [1, 2, 9, 10], versions
    # By step, as hyctl: the newest committed version of that step.
    step = hystate._hy.Store(store).versions()[0]["step"]
    by_step = hystate.reshard(store, "fsdp=2", step=step)
    assert by_step["version"] == 11 and by_step["step"] == step, by_step
    with pytest.raises(hystate.NotFound, match="step 99"):
        hystate.reshard(store, "fsdp=2", step=99)
    with pytest.raises(hystate.InvalidArgument, match="not both"):
        hystate.reshard(store, "fsdp=2", step=step, version_id=1)
    # The old form (a positional version id, new_version=) warns and
    # still means a version id.
    with pytest.warns(DeprecationWarning, match="version_id"):
        old = hystate.reshard(store, 1, "tp=2", new_version=12)
    assert old["version"] == 12 and old["step"] == step, old
    # One rank's store of a hystate.save directory is not a whole model.
    ckpt = str(tmp_path / "ckpt")
    hystate.save(ckpt, {"w": torch.randn(8, 8)})
    part = os.path.join(ckpt, "node-0", "store")
    saved = hystate._hy.Store(part).versions()[-1]["version"]
    with pytest.raises(hystate.FailedPrecondition, match="every rank"):
        hystate.reshard(part, "tp=2", version_id=saved)


def test_installed_package_is_the_one_tested():
    """The tests import hystate from PYTHONPATH's first entry, and `python
    -m hystate --version` names it. Under CTest (HY_TEST_PIP_INSTALLED=1) that is what
    `pip install` put there; elsewhere it may be a build tree (the GPU kit
    runs the tests against build/python), which has no dist-info."""
    where = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if not where:
        pytest.skip("PYTHONPATH is not set: run through CTest")
    assert os.path.realpath(hystate.__file__).startswith(os.path.realpath(where))
    if os.environ.get("HY_TEST_PIP_INSTALLED") == "1":
        assert os.path.isdir(
            os.path.join(where, f"hystate-{hystate.__version__}.dist-info"))
    out = subprocess.run([sys.executable, "-m", "hystate", "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"hystate {hystate.__version__} ("), out
    assert os.path.realpath(where) in out, out


def test_bf16_and_numpy2_views_save_and_load_bitwise(tmp_path):
    """Every kind of leaf hands C++ a view of its own memory (numpy 2
    arrays, numpy views of torch tensors, bf16 as int16, non-contiguous
    sources copied), saved in the background with the GIL released while
    this thread goes on with torch; each loads back bit for bit."""
    assert int(np.__version__.split(".")[0]) >= 2, np.__version__
    g = torch.Generator().manual_seed(3)
    base = torch.randn(64, 48, generator=g)
    state = {
        "bf16": base.to(torch.bfloat16),
        "f16": base.to(torch.float16)[::2],          # non-contiguous source
        "t_view": base[:, 5:9],                     # non-contiguous view
        "np_f64": np.linspace(-1, 1, 777),
        "np_fortran": np.asfortranarray(base.numpy()[:7, :9]),
        "np_i8": np.arange(-100, 100, dtype=np.int8),
        "np_bool": np.arange(10) % 3 == 0,
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "opt": {"exp_avg": torch.randn(300, generator=g), "step": 7},
    }
    path = str(tmp_path / "ckpt")
    h = hystate.save_async(path, state)
    for _ in range(20):  # torch works on while the save writes.
        base @ base.T
    assert h.wait() == 0
    assert h.stats["total_new_bytes"] > 0
    targets = {
        k: (torch.empty_like(v).contiguous() if isinstance(v, torch.Tensor)
            else np.empty_like(v, order="C")) for k, v in state.items()
        if k != "opt"}
    targets["opt"] = {"exp_avg": torch.zeros(300), "step": 0}
    assert hystate.load(path, targets) == 0
    for k, v in state.items():
        if k == "opt":
            continue
        got = targets[k]
        if isinstance(v, torch.Tensor):
            a, b = got, v.contiguous()
            if a.dtype in (torch.bfloat16, torch.float16):
                a, b = a.view(torch.int16), b.view(torch.int16)
            assert torch.equal(a, b), k
        else:
            assert got.dtype == v.dtype and np.array_equal(
                got.view(np.uint8), np.ascontiguousarray(v).view(np.uint8)), k
    assert torch.equal(targets["opt"]["exp_avg"], state["opt"]["exp_avg"])
    assert targets["opt"]["step"] == 7


def _sha256(t):
    import hashlib
    b = t.view(torch.uint8) if t.dtype == torch.bfloat16 else t
    return hashlib.sha256(b.numpy().tobytes()).hexdigest()


def _verify_json(path):
    r = subprocess.run([os.environ["HYCTL"], "verify", "-o", "json", path],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None


def test_store_of_chunk_format_1_reads_verifies_and_takes_new_steps(
        tmp_path):
    """tests/data/stores/format1: written by hystate before chunk format 2
    (make_format1.py), with the sha256 of every tensor per step computed
    then. Today's package reads it bit for bit, hyctl verifies it and counts
    its chunks by format, and a new step saved into it is format 2 while
    the chunks it shares with the old steps stay (deduplicated by address,
    not rewritten)."""
    import shutil
    data = os.path.join(HERE, "..", "data", "stores")
    path = str(tmp_path / "format1")
    shutil.copytree(os.path.join(data, "format1"), path)
    with open(os.path.join(data, "format1.json")) as f:
        meta = json.load(f)
    dtypes = {"torch.float32": torch.float32,
              "torch.bfloat16": torch.bfloat16,
              "torch.int64": torch.int64, "torch.uint8": torch.uint8}

    def empty():
        return {k: torch.empty(meta["shapes"][k], dtype=dtypes[d])
                for k, d in meta["dtypes"].items()}

    for step in (1, 2):
        state = empty()
        assert hystate.load(path, state, step=step) == step
        for k, t in state.items():
            assert _sha256(t) == meta["sha256"][str(step)][k], (step, k)
    rc, versions = _verify_json(path + "/node-0/store")
    assert rc == 0, versions
    old_chunks = versions[-1]["chunks_by_format"]
    assert set(old_chunks) == {"1"}, versions

    # Step 3: one tensor changed; the others' chunks are the old ones.
    state = empty()
    hystate.load(path, state, step=2)
    state["w"][0, :8] = 0.5
    assert hystate.save(path, state, step=3, chunk_bytes=256 * 1024) == 3
    rc, versions = _verify_json(path + "/node-0/store")
    assert rc == 0, versions
    newest = versions[-1]
    assert newest["step"] == 3
    assert newest["chunks_by_format"].get("2", 0) == 1, newest
    assert newest["chunks_by_format"]["1"] == newest["chunks"] - 1, newest
    back = empty()
    hystate.load(path, back, step=3)
    for k in state:
        assert torch.equal(back[k].view(torch.uint8) if k == "b" else back[k],
                           state[k].view(torch.uint8) if k == "b"
                           else state[k]), k
    for step in (1, 2):
        back = empty()
        hystate.load(path, back, step=step)
        assert all(_sha256(t) == meta["sha256"][str(step)][k]
                   for k, t in back.items())

    # A damaged format 1 chunk is DataLoss, as ever, and hyctl says which.
    store = os.path.join(path, "node-0", "store")
    big = max((os.path.join(store, n) for n in os.listdir(store)
               if n.endswith(".sst")), key=os.path.getsize)
    with open(big, "r+b") as fh:
        fh.seek(os.path.getsize(big) // 2)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 0x10]))
    with pytest.raises(hystate.Error) as e:
        hystate.load(path, empty(), step=1)
    assert e.value.code == "DataLoss", e.value
    rc, versions = _verify_json(store)
    assert rc == 3
    assert any(v["bad"] for v in versions)


def test_errors_are_hy_errors_and_their_builtin_kin(tmp_path):
    for name, kin in (("NotFound", LookupError), ("IOError", OSError),
                      ("InvalidArgument", ValueError)):
        cls = getattr(hystate, name)
        assert issubclass(cls, hystate.Error) and issubclass(cls, kin), name
        assert cls.code == name
    for name in ("DataLoss", "Aborted", "Unavailable"):
        cls = getattr(hystate, name)
        assert issubclass(cls, hystate.Error)
        assert not issubclass(cls, (LookupError, OSError, ValueError)), name
    with pytest.raises(LookupError) as e:
        hystate.load(str(tmp_path / "none"), {"w": torch.zeros(2)})
    assert isinstance(e.value, hystate.NotFound)
    assert e.value.code == "NotFound"
