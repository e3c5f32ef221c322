"""The engine's weight digest (hy_vllm.worker, issue 74) against a real
bfloat16 vLLM engine (the .venv-vllm/ that scripts/install-deps.sh makes;
HY_VLLM_PYTHON overrides) on the README demo's model shape.

1. After EngineSync pushes a model (whole, then a delta that touches one
   part of a fused layer), the engine's digest (hy_weights_digest) equals
   xxh3-64 of every pushed tensor's bytes in bfloat16, by Hugging Face name
   (the tied lm_head.weight included), and the update took it inside the
   load (hy_last_update's digest_s) with no packed weight differing from
   what it was packed from.
2. A byte flipped in the shared file between its write and the engine's
   load changes exactly that tensor's digest (k_proj: the middle of the
   fused qkv_proj; a norm), and nothing else.
3. A manifest entry that vLLM's load_weights skips without a word (an
   unexpected ".bias") is absent from the digest and listed as skipped; an
   unknown name fails the update and is absent from the digest.
"""

import ctypes
import json
import os
import shutil
import sys
import urllib.error
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

SRC = Path(os.environ.get("HY_SOURCE_DIR",
                          Path(__file__).resolve().parents[2]))
sys.path.append(str(SRC / "python"))  # hy_vllm; hystate is the installed one
from hy_vllm import serve  # noqa: E402  (imports no vLLM)

from hystate.vllm import EngineSync  # noqa: E402

# The engines started here compute the digest (hy_vllm leaves it off
# unless asked).
os.environ["HY_VLLM_DIGEST"] = "1"
VLLM_PYTHON = os.environ.get("HY_VLLM_PYTHON",
                             str(SRC / ".venv-vllm" / "bin" / "python3"))


def _xxh3():
    try:
        lib = ctypes.CDLL("libxxhash.so.0")
    except OSError:
        pytest.skip("no libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return lib.XXH3_64bits


def digest_of(t, fn):
    """What a trainer computes of a tensor it writes: xxh3-64 (seed 0,
    hy::Checksum64) of its bytes in the engine's dtype."""
    t = t.detach().to(torch.bfloat16).contiguous()
    return "%016x" % fn(t.data_ptr(), t.numel() * t.element_size())


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    cfg = Qwen3Config(vocab_size=272, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=32,
                      max_position_embeddings=128, tie_word_embeddings=True,
                      bos_token_id=257, eos_token_id=258)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.save_pretrained(d / "model")
    for f in (SRC / "configs" / "demo-tokenizer").iterdir():
        shutil.copy(f, d / "model" / f.name)
    e = serve.Engine(d / "model", d / "engine.log", dtype="bfloat16",
                     python=VLLM_PYTHON)
    e.state = model.state_dict()
    e.dir = d
    yield e
    e.close()


def rpc(engine, method, **kwargs):
    return engine.request("/collective_rpc", {"method": method,
                                              "kwargs": kwargs})["results"][0]


def load_by_hand(engine, state, path, flip=(), extra=()):
    """Writes `state` (bf16) into a file laid out as docs/weight-sync.md
    says, flips the first byte of each tensor named in `flip` after the
    write, adds the manifest entries `extra` (pointing at the first
    tensor's bytes) and loads it as a whole update; the routes' error, if
    any."""
    manifest, at, seen, blobs = [], 0, {}, []
    for name, t in state.items():
        key = (t.data_ptr(), tuple(t.shape))
        if key in seen:
            off = seen[key]
        else:
            off = seen[key] = at
            b = t.detach().to(torch.bfloat16).contiguous().view(torch.uint8)
            blobs.append((off, bytearray(b.numpy().tobytes())))
            if name in flip:
                blobs[-1][1][0] ^= 0x01
            at = (at + b.numel() + 63) // 64 * 64
        manifest.append({"name": name, "dtype": "bfloat16",
                         "shape": list(t.shape), "offset": off})
    for name, shape in extra:
        manifest.append({"name": name, "dtype": "bfloat16",
                         "shape": list(shape), "offset": 0})
    with open(path, "wb") as f:
        f.truncate(at)
        for off, b in blobs:
            f.seek(off)
            f.write(b)
    info = {"manifest_json": json.dumps(manifest), "size": at,
            "path": str(path), "version": "", "base_version": ""}
    engine.request("/start_weight_update", {})
    err = None
    try:
        engine.request("/update_weights", {"update_info": info})
    except urllib.error.HTTPError as e:
        err = e.read().decode(errors="replace")
    try:  # After a failed update vLLM has ended the session already.
        engine.request("/finish_weight_update",
                       {"weight_version": "" if err else "by-hand"})
    except urllib.error.HTTPError:
        if not err:
            raise
    engine.request("/reset_prefix_cache", {})
    return err


def test_digest_equals_the_pushed_tensors_whole_and_delta(engine):
    fn = _xxh3()
    state = {k: v.clone() for k, v in engine.state.items()}
    state["lm_head.weight"] = state["model.embed_tokens.weight"]  # tied
    with EngineSync([engine.url], api_key=engine.key, dtype="bfloat16",
                    delta=True) as sync:
        for step in (1, 2):
            if step == 2:  # One part of a fused layer and a norm.
                state["model.layers.0.self_attn.q_proj.weight"][:3] += 0.5
                state["model.norm.weight"][:5] -= 0.25
            rep = sync.push(state, step)
            got = rpc(engine, "hy_weights_digest")
            want = {n: digest_of(t, fn) for n, t in state.items()}
            assert set(got) == set(want), set(got) ^ set(want)
            bad = [n for n in want if got[n] != want[n]]
            assert not bad, bad
            last = rpc(engine, "hy_last_update")
            assert last["kernel_mismatch"] == 0 and last["skipped"] == []
            assert last["delta"] is (step == 2), last
            if step == 1:  # Some packed weights were read back.
                assert last["kernel_checked"] > 0, last
            print(f"step {step}: {rep.engines[0].mode}, digest "
                  f"{last['digest_s'] * 1e3:.1f} ms of a "
                  f"{rep.engines[0].seconds * 1e3:.0f} ms load")
    # The digest taken at the update alone (no live rehash) is the same.
    assert rpc(engine, "hy_weights_digest", live="0") == got
    some = ["model.layers.1.mlp.gate_proj.weight", "lm_head.weight"]
    assert rpc(engine, "hy_weights_digest", names=json.dumps(some)) == \
        {n: want[n] for n in some}


def test_a_byte_flipped_after_the_write_changes_that_tensor_only(engine):
    fn = _xxh3()
    state = dict(engine.state)
    want = {n: digest_of(t, fn) for n, t in state.items()}
    flipped = ["model.layers.1.self_attn.k_proj.weight",
               "model.layers.0.post_attention_layernorm.weight"]
    assert load_by_hand(engine, state, engine.dir / "flip.bin",
                        flip=flipped) is None
    got = rpc(engine, "hy_weights_digest")
    assert sorted(n for n in want if got.get(n) != want[n]) == sorted(flipped)
    # Loaded again without the flip: all equal.
    assert load_by_hand(engine, state, engine.dir / "ok.bin") is None
    got = rpc(engine, "hy_weights_digest")
    assert [n for n in want if got.get(n) != want[n]] == []


def test_names_the_engine_did_not_load_are_reported(engine):
    fn = _xxh3()
    state = dict(engine.state)
    # vLLM's AutoWeightsLoader drops an unexpected ".bias" silently.
    ignored = "model.layers.0.mlp.down_proj.bias"
    assert load_by_hand(engine, state, engine.dir / "ignored.bin",
                        extra=[(ignored, (128,))]) is None
    got = rpc(engine, "hy_weights_digest")
    assert ignored not in got
    assert rpc(engine, "hy_last_update")["skipped"] == [ignored]
    want = {n: digest_of(t, fn) for n, t in state.items()}
    want[ignored] = "what a trainer sent"
    assert [n for n in want if got.get(n) != want[n]] == [ignored]
    # An unknown name fails the update (vLLM raises) and is not held.
    unknown = "model.layers.0.mlp.extra_proj.weight"
    err = load_by_hand(engine, state, engine.dir / "unknown.bin",
                       extra=[(unknown, (4, 4))])
    assert err and "extra_proj" in err, err
    got = rpc(engine, "hy_weights_digest")
    assert unknown not in got
    # The engine still serves what it did: the layers the failed update
    # loaded got the same bytes again, the others kept theirs.
    assert [n for n in want if got.get(n) != want[n]] == [ignored]
