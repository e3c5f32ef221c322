"""hystate.vllm against a real vLLM engine (the .venv-vllm/ that
scripts/install-deps.sh makes; HY_VLLM_PYTHON overrides), PyTorch's FSDP2
under torchrun, and transformers.

1. FSDP2 on 2 ranks trains a tiny Qwen3 3 steps and pushes its sharded
   state after each: the engine's greedy tokens then equal transformers'
   generate on the full weights PyTorch gathers (DTensor.full_tensor); the
   first push is whole, the next two are deltas naming only the trained
   tensors (layer 0 and the embedding are frozen). The same with rank 1 on
   another host (its own namespaces): it sends its changed values over
   c10d, as index/value pairs where few changed.
2. A delta and a full push leave bit-identical weights in the engine, with
   changes that touch one part of a fused layer (q_proj alone: the engine
   must reload qkv_proj from q, k and v) and the tied embedding.
3. An engine left out of a push, or whose version changed behind the
   sync's back, is sent the whole model next, and a delta against a
   version the engine does not hold is refused by the engine itself,
   which keeps serving the weights it had.
4. The C++ writer (hyctl train) and EngineSync speak one protocol
   (docs/weight-sync.md): the same step leaves bit-identical weights in
   the engine whichever wrote it.

One float32 engine serves every test (it starts in about a minute); once
it is killed, the shared memory it mapped in /dev/shm is gone too.
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

SRC = Path(os.environ.get("HY_SOURCE_DIR",
                          Path(__file__).resolve().parents[2]))
sys.path.append(str(SRC / "python"))  # hy_vllm; hystate is the installed one
from hy_vllm import serve  # noqa: E402  (imports no vLLM)

from hystate import Unavailable  # noqa: E402
from hystate.vllm import EngineSync  # noqa: E402

VLLM_PYTHON = os.environ.get("HY_VLLM_PYTHON",
                             str(SRC / ".venv-vllm" / "bin" / "python3"))
HERE = Path(__file__).resolve().parent


def tiny_qwen3(path):
    """The demo's model shape (configs/demo.yaml) with the demo tokenizer,
    random weights, as transformers saves it."""
    cfg = Qwen3Config(vocab_size=272, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=32,
                      max_position_embeddings=128, tie_word_embeddings=True,
                      bos_token_id=257, eos_token_id=258)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.save_pretrained(path)
    for f in (SRC / "configs" / "demo-tokenizer").iterdir():
        shutil.copy(f, path / f.name)
    return path


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    e = serve.Engine(tiny_qwen3(d / "model"), d / "engine.log",
                     dtype="float32", python=VLLM_PYTHON, quiet=False)
    e.model = d / "model"
    yield e
    seen = serve.mapped_segments(e.proc.pid)
    e.close()
    # vLLM's message queues' ring buffers, which the SIGKILL leaves in
    # /dev/shm, went with the engine.
    assert seen and not [n for n in seen if os.path.exists(f"/dev/shm/{n}")]


def crc32s(engine):
    got = engine.request("/collective_rpc", {"method": "hy_weights_crc32"})
    return got["results"][0]


def last_update(engine):
    return engine.request("/collective_rpc",
                          {"method": "hy_last_update"})["results"][0]


def copy(state):
    """A copy of a state dict that keeps tied tensors tied."""
    memo = {}
    out = {}
    for k, v in state.items():
        if v.data_ptr() not in memo:
            memo[v.data_ptr()] = v.clone()
        out[k] = memo[v.data_ptr()]
    return out


def states(model_dir, n):
    """n state dicts, each a small change of the one before."""
    model = AutoModelForCausalLM.from_pretrained(model_dir,
                                                 dtype=torch.float32)
    s = model.state_dict()
    assert (s["lm_head.weight"].data_ptr()
            == s["model.embed_tokens.weight"].data_ptr())
    s = copy(s)
    g = torch.Generator().manual_seed(7)
    out = [s]
    touch = [["model.layers.0.self_attn.q_proj.weight"],  # one of qkv
             ["model.embed_tokens.weight",  # tied with lm_head
              "model.layers.1.mlp.up_proj.weight"],  # one of gate_up
             ["model.norm.weight"]]
    for i in range(1, n):
        s = copy(s)
        for name in touch[(i - 1) % len(touch)]:
            t = s[name]
            mask = torch.rand(t.shape, generator=g) < 0.05
            t[mask] += 0.01
        out.append(s)
    return out


def run_ranks(engine, tmp_path, two_hosts=False, mode="train"):
    """vllm_sync_ranks.py on 2 ranks: under torchrun, or by hand with rank
    1 in namespaces of its own (another hostname, so another host, and an
    empty /dev/shm, so it cannot reach the weight file). Returns rank 0's
    record of each step."""
    env = dict(os.environ, HY_VLLM_API_KEY=engine.key, OMP_NUM_THREADS="1")
    args = [HERE / "vllm_sync_ranks.py", engine.model, tmp_path, engine.url,
            mode]
    port = str(serve.free_port())
    if not two_hosts:
        procs = [subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run",
             "--nproc-per-node", "2", "--master-port", port, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)]
    else:
        probe = subprocess.run(["unshare", "-rmu", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            pytest.skip("cannot make namespaces here (unshare -rmu): "
                        + probe.stderr.decode())
        procs = []
        for rank in range(2):
            cmd = [sys.executable, *args]
            if rank == 1:
                cmd = ["unshare", "-rmu", "sh", "-c",
                       "mount -t tmpfs none /dev/shm && hostname hy-host-b"
                       ' && exec "$0" "$@"', *cmd]
            procs.append(subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env=dict(env, RANK=str(rank), WORLD_SIZE="2",
                                    MASTER_ADDR="127.0.0.1",
                                    MASTER_PORT=port)))
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-3000:] + err[-5000:]
    steps = [json.loads(l) for l in
             (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3]
    return steps


def check_against_transformers(engine, tmp_path, steps):
    """Each step's engine tokens equal transformers' greedy tokens on the
    weights PyTorch gathered, and its log-probs are theirs, not the last
    step's."""
    from vllm_sync_ranks import PROMPTS

    def transformers_greedy(model_dir):
        ref = AutoModelForCausalLM.from_pretrained(model_dir,
                                                   dtype=torch.float32)
        out = []
        for prompt in PROMPTS:
            g = ref.generate(torch.tensor([prompt]), max_new_tokens=6,
                             min_new_tokens=6, do_sample=False,
                             eos_token_id=None, pad_token_id=0,
                             output_scores=True, return_dict_in_generate=True)
            toks = g.sequences[0, len(prompt):].tolist()
            lps = [torch.log_softmax(sc[0], -1)[t].item()
                   for sc, t in zip(g.scores, toks)]
            out.append((toks, lps))
        return out

    before = transformers_greedy(engine.model)
    for s in steps:
        want = transformers_greedy(tmp_path / f"step-{s['step']}")
        gap = stale = 0.0
        for (got_t, got_l), (want_t, want_l), (_, old_l) in zip(
                s["engine"], want, before):
            assert got_t == want_t, s["step"]
            gap = max(gap, *(abs(a - b) for a, b in zip(got_l, want_l)))
            stale = max(stale, *(abs(a - b) for a, b in zip(old_l, want_l)))
        # The engine serves this step's weights, not the last step's: its
        # log-probs are transformers' on them, and those moved.
        print(f"step {s['step']}: log-prob gap {gap:.1e}, moved {stale:.1e}")
        assert gap < 1e-4 and stale > 20 * gap, (gap, stale)
        before = want
        r = s["report"]
        (e,) = r["engines"]
        print(f"step {s['step']}: {e['mode']}, {e['tensors']} of "
              f"{r['tensors']} tensors, {e['bytes']} of {r['model_bytes']}"
              f" bytes, {r['wire_bytes']} over c10d, {e['seconds']:.2f} s")


def test_fsdp2_two_ranks_sync_each_step_and_match_transformers(engine,
                                                              tmp_path):
    steps = run_ranks(engine, tmp_path)
    check_against_transformers(engine, tmp_path, steps)
    for s in steps:
        r = s["report"]
        (e,) = r["engines"]
        assert r["wire_bytes"] == 0  # One host: nothing crosses c10d.
        if s["step"] == 1:
            assert e["mode"] == "full" and e["tensors"] == r["tensors"] == 24
        else:
            # Layer 1 (11 tensors) and the final norm train; layer 0 and
            # the tied embedding do not.
            assert e["mode"] == "delta", e
            assert r["changed_tensors"] == 12, r
            assert e["tensors"] == 12, e
    assert last_update(engine)["delta"] is True
    # The engine is at step 3 and the two ranks wrote halves of it.
    assert engine.request("/weight_info")["weight_version"] == "3"


def test_fsdp2_rank_on_another_host_sends_what_changed_over_c10d(engine,
                                                                tmp_path):
    """Rank 1 on another host than the engine and rank 0: it sends its
    half of the model once, then only the values that changed (1% of two
    tensors: index/value pairs), and the engine still serves exactly the
    weights PyTorch gathers."""
    steps = run_ranks(engine, tmp_path, two_hosts=True, mode="sparse")
    check_against_transformers(engine, tmp_path, steps)
    first = steps[0]["report"]
    # Rank 1's half of every tensor but the tied alias, in float32.
    assert 0.4 * first["model_bytes"] < first["wire_bytes"] < \
        0.6 * first["model_bytes"], first
    for s in steps[1:]:
        r = s["report"]
        (e,) = r["engines"]
        assert e["mode"] == "delta" and r["changed_tensors"] == 2, r
        # 1% of rank 1's half of two tensors, 8 bytes a value.
        assert 0 < r["wire_bytes"] < 0.01 * first["wire_bytes"], r
    assert engine.request("/weight_info")["weight_version"] == "3"


def test_each_part_is_written_by_one_rank_preferring_rank_0s_host():
    """Which rank sends which part (no engine): a replicated box goes to
    the lowest rank on rank 0's host, a plain tensor to rank 0, and parts
    that do not make the whole tensor are InvalidArgument."""
    from hystate import InvalidArgument
    from hystate.vllm import _Entry, _owners
    a = _Entry("a", (4, 2), 0, 16)
    b = _Entry("b", (4,), 64, 8)
    tied = _Entry("c", (4, 2), 0, 16, alias_of=0)
    top, bottom = ((0, 0), (2, 2)), ((2, 0), (2, 2))
    # Ranks 0 and 2 on rank 0's host; 1 and 3 elsewhere. Rank 1 and 3
    # hold the top half replicated, ranks 0 and 2 the bottom.
    boxes = [[bottom, "plain", None], [top, "plain", None],
             [bottom, "plain", None], [top, "plain", None]]
    got = _owners([a, b, tied], boxes, [True, False, True, False])
    assert got == [{0: bottom, 1: None}, {0: top}, {}, {}]
    # A rank of rank 0's host that holds the top half takes it.
    boxes[2][0] = top
    boxes[0][0] = ((0, 0), (4, 2))
    with pytest.raises(InvalidArgument, match="12 of its 8"):
        _owners([a, b, tied], boxes, [True, False, True, False])
    boxes[0][0] = bottom
    got = _owners([a, b, tied], boxes, [True, False, True, False])
    assert got[2] == {0: top} and got[1] == {} and got[3] == {}
    boxes[1][0] = boxes[3][0] = None
    boxes[2][0] = None
    with pytest.raises(InvalidArgument, match="4 of its 8"):
        _owners([a, b, tied], boxes, [True, False, True, False])
    boxes[2][0] = top
    boxes[3][1] = ((0,), (4,))
    with pytest.raises(InvalidArgument, match="plain tensor on others"):
        _owners([a, b, tied], boxes, [True, False, True, False])


def test_changed_indices_cross_as_16_bit_gaps_whatever_their_spacing():
    """What a rank on another host sends for a part that changed a little
    (hystate._hy.gap_code, checked against numpy's own comparison): its
    changed values after 16-bit gaps, entries added only where two changes
    lie 65536 or more apart; gap_apply brings the old values to the new
    ones; more changes than allowed is None; an index past the end is
    InvalidArgument with nothing written."""
    import numpy as np
    from hystate import InvalidArgument, _hy
    n = 5_000_000
    rng = np.random.default_rng(3)
    cases = [
        [0], [n - 1], [65535, 65536 * 2, 65536 * 2 + 1],
        [0, 65536, 65536 * 2 + 1, 4_999_999],  # 65536 apart.
        list(range(0, n, 65537)), list(range(0, n, 32768)),
        sorted(rng.choice(n, 50_000, replace=False)),
        sorted(rng.choice(n, 7, replace=False)), list(range(100, 3000)),
    ]
    for dtype in (np.int16, np.int32):
        old = rng.integers(-30000, 30000, n).astype(dtype)
        for changed in cases:
            idx = np.array(changed, dtype=np.int64)
            new = old.copy()
            new[idx] ^= 0x1234  # Another bit pattern at each.
            assert np.array_equal(np.flatnonzero(new != old), idx)
            gaps, vals = _hy.gap_code(new, old, n)
            assert gaps.dtype == np.int16 and vals.dtype == dtype
            sent = np.cumsum((gaps.astype(np.int64) & 0xFFFF) + 1) - 1
            assert np.all(np.diff(sent) > 0) and set(idx) <= set(sent)
            assert np.array_equal(vals, new[sent])
            # Added entries only bridge distances too long for 16 bits.
            d = np.diff(idx, prepend=-1)
            assert len(sent) - len(idx) == int(((d - 1) // 65536).sum())
            assert np.all(np.diff(sent, prepend=-1) <= 65536)
            base = old.copy()
            _hy.gap_apply(base, gaps, vals)
            assert np.array_equal(base, new)
            # One entry fewer than needed: not coded.
            assert _hy.gap_code(new, old, len(sent) - 1) is None
    same = old.copy()
    assert [len(a) for a in _hy.gap_code(same, old, 10)] == [0, 0]
    gaps, vals = _hy.gap_code(new[:1000], old[:1000], 1000)
    short = old[:10].copy()
    with pytest.raises(InvalidArgument, match="index .* in a part of 10"):
        _hy.gap_apply(short, gaps, vals)
    assert np.array_equal(short, old[:10])  # Nothing written.
    with pytest.raises(InvalidArgument):
        _hy.gap_code(new, old[:-1], n)
    with pytest.raises(InvalidArgument):
        _hy.gap_code(new.astype(np.int64), old.astype(np.int64), n)


def test_a_killed_syncs_file_is_removed_by_the_next_one(tmp_path):
    """A sync killed before close() leaves its file (a model's size in
    /dev/shm); the next sync's sweep removes it once its process is gone,
    and never the file of a live sync, nor one it did not make."""
    from hystate.vllm import _SHM_NAME, _sweep_stale
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import os, sys, time; from hystate.vllm import _create\n"
         "p = os.path.join(sys.argv[1], f'hystate-vllm-{os.getpid()}-"
         "0123abcd')\n"
         "_create(p, 1 << 20, lock=True); print(p, flush=True); "
         "time.sleep(600)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    live = holder.stdout.readline().strip()
    assert _SHM_NAME.fullmatch(os.path.basename(live))
    assert os.path.getsize(live) == 1 << 20
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".new")]
    # A dead process's file from before the lock (none held), and files
    # the sweep must leave: this process's, another name.
    dead = subprocess.run([sys.executable, "-c", "import os; "
                           "print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    old = tmp_path / f"hystate-vllm-{dead}-00ff00ff"
    mine = tmp_path / f"hystate-vllm-{os.getpid()}-11111111"
    other = tmp_path / f"hystate-vllm-{dead}-notmine"
    for f in (old, mine, other):
        f.write_bytes(b"x")
    # A dead pid in the name is not enough while the lock is held (a sync
    # in another pid namespace, where pids differ).
    held = tmp_path / f"hystate-vllm-{dead}-22222222"
    held.write_bytes(b"x")
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    assert _sweep_stale(str(tmp_path)) == [str(old)]
    assert os.path.exists(live) and held.exists()
    assert mine.exists() and other.exists()
    os.close(fd)
    holder.kill()
    holder.wait()
    assert sorted(_sweep_stale(str(tmp_path))) == sorted([live, str(held)])
    assert mine.exists() and other.exists()


def test_delta_and_full_push_leave_identical_weights(engine):
    seq = states(engine.model, 5)
    crcs = {}
    for delta in (True, False):
        with EngineSync([engine.url], api_key=engine.key, dtype="float32",
                        delta=delta) as sync:
            seen = []
            for step, s in enumerate(seq):
                r = sync.push(s, step + 10)
                (e,) = r.engines
                seen.append((e.mode, e.tensors, r.changed_tensors))
                crcs.setdefault(delta, []).append(crc32s(engine))
            print(f"delta={delta}: {seen}")
            modes = [m for m, _, _ in seen]
            if delta:
                assert modes == ["full"] + ["delta"] * 4, seen
                # q_proj alone; the embedding (its tied head shares its
                # bytes) and up_proj; the norm; q_proj. The engine widens
                # a part of a fused layer to the layer (below).
                assert [c for _, _, c in seen[1:]] == [1, 2, 1, 1], seen
                assert [t for _, t, _ in seen[1:]] == [1, 2, 1, 1], seen
                upd = last_update(engine)
                assert upd["delta"] and upd["tensors"] == 3, upd  # q, k, v
            else:
                assert modes == ["full"] * 5, seen
    assert crcs[True] == crcs[False]
    assert len({json.dumps(c, sort_keys=True) for c in crcs[True]}) == 5


def test_skipped_or_changed_engine_gets_the_whole_model(engine):
    seq = states(engine.model, 4)
    with EngineSync([engine.url], api_key=engine.key,
                    dtype="float32") as sync:
        sync.push(seq[0], 20)
        # Left out of step 21: the engine holds 20, the file 21.
        r = sync.push(seq[1], 21, engines=[])
        assert r.engines[0].mode == "skipped"
        assert engine.request("/weight_info")["weight_version"] == "20"
        r = sync.push(seq[2], 22)
        assert r.engines[0].mode == "full", r
        want = crc32s(engine)
        # Its version changed behind the sync's back: whole again.
        engine.request("/update_weight_version", {"new_version": "other"})
        r = sync.push(seq[3], 23)
        assert r.engines[0].mode == "full" and "other" in r.engines[0].error
        at23 = crc32s(engine)
        assert at23 != want
        # A delta against a version the engine does not hold: refused by
        # the engine itself, which keeps its weights and serves.
        manifest = [{"name": "model.norm.weight", "dtype": "float32",
                     "shape": [128], "offset": 0, "changed": True}]
        engine.request("/start_weight_update", {})
        with pytest.raises(Exception) as e:
            engine.request("/update_weights", {"update_info": {
                "manifest_json": json.dumps(manifest), "version": "24",
                "base_version": "22"}})
        assert "holds '23'" in e.value.read().decode(), e
        assert crc32s(engine) == at23
        assert engine.greedy([[257, 49, 43, 50, 61]], 3)
        # And the sync, whose step 23 the engine still holds, goes on with
        # a delta.
        r = sync.push(seq[0], 24)
        assert r.engines[0].mode == "delta", r


def test_engine_gone_is_unavailable_and_bad_state_is_rejected(engine):
    s = states(engine.model, 1)[0]
    with EngineSync(["http://127.0.0.1:9"], dtype="float32") as sync:
        with pytest.raises(Unavailable, match="127.0.0.1:9"):
            sync.push(s, 1)
    with EngineSync([engine.url], api_key=engine.key,
                    dtype="float32") as sync:
        with pytest.raises(Exception, match="not a floating"):
            sync.push({"x": torch.zeros(3, dtype=torch.int64)}, 1)
    with EngineSync([engine.url], api_key=engine.key,
                    dtype="float32") as sync:
        sync.push(s, 30)
        bad = dict(s)
        bad["model.norm.weight"] = torch.zeros(64)
        with pytest.raises(Exception, match="first push"):
            sync.push(bad, 31)
        # Nothing reached the engine, and the next push of the real state
        # goes on from step 30.
        assert engine.request("/weight_info")["weight_version"] == "30"
        assert sync.push(s, 32).engines[0].mode == "full"


def test_cpp_and_python_writers_leave_the_same_weights(engine, tmp_path):
    """The two writers of docs/weight-sync.md speak one protocol: hyctl
    train (the C++ writer, trainer/vllm) syncs step 1 of a float32 run
    into the engine; EngineSync pushes the same step, as hyctl export-hf
    writes it, into the same engine, as a delta after other weights and
    as a fresh sync's full push: the engine's weights (hy_weights_crc32,
    every parameter as vLLM holds it, fused) are bit-identical each time."""
    if not os.environ.get("HYCTL"):
        pytest.skip("HYCTL (the hyctl binary) is not set; CTest sets it")

    def hyctl(*args):
        p = subprocess.run([os.environ["HYCTL"], *map(str, args)], cwd=SRC,
                           capture_output=True, text=True,
                           env=dict(os.environ, HY_VLLM_API_KEY=engine.key))
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]

    data = tmp_path / "train.jsonl"
    hyctl("data", "gen-arith", data, "--count", 2000, "--seed", 1, "--ops",
          "+", "--max-digits", 1)
    store = tmp_path / "run"
    hyctl("train", "--config", SRC / "configs" / "demo.yaml", "--data", data,
          "--store", store, "--iterations", 2, "--set",
          "rollout.engine=vllm", "--set", f"rollout.vllm.urls=[{engine.url}]",
          "--set", "rollout.vllm.dtype=float32", "--set",
          "checkpoint.save_every=1")
    # Iteration 2 was generated by step 1's weights.
    assert engine.request("/weight_info")["weight_version"] == "1"
    by_cpp = crc32s(engine)
    hyctl("export-hf", store, tmp_path / "hf", "--step", 1)
    state = AutoModelForCausalLM.from_pretrained(
        tmp_path / "hf", dtype=torch.float32).state_dict()
    with EngineSync([engine.url], api_key=engine.key,
                    dtype="float32") as sync:
        sync.push(states(engine.model, 1)[0], 100)
        assert crc32s(engine) != by_cpp
        r = sync.push(state, 101)
        assert r.engines[0].mode == "delta", r
        assert crc32s(engine) == by_cpp
    with EngineSync([engine.url], api_key=engine.key,
                    dtype="float32") as sync:
        assert sync.push(state, 102).engines[0].mode == "full"
        assert crc32s(engine) == by_cpp
