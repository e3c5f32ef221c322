"""hystate.vllm.EngineSync from one process with a plain state dict, as
bench/vllm_sync_bench.py's "python" rows: a full push, then deltas after
changes of three kinds, each against a full push of the same state, median
of --reps. Prints one JSON object.

  values 1%   1% of the values of every tensor changed: every tensor
              changed, so the delta reloads what a full push does
  frozen emb  the same in every tensor but the (tied) embedding
  last 4      only the last 4 decoder layers changed (a partial fine-tune)

Run with the build's interpreter (.venv/bin/python3, hystate on the path):
  python3 bench/py_vllm_sync.py --model-dir D --url U [--reps 3]
with the engine's key in $HY_VLLM_API_KEY.
"""

import argparse
import json
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from hystate.vllm import EngineSync

# Before each timed push: the engine's OpenMP threads spin for a while
# after a reload, and on 2 cores a push right behind one ran its write up
# to 10x slower (a real cost where trainer and engine share cores, but
# not the push's own).
IDLE_S = 1.0


def change(state, names, frac, gen):
    """Changes each value of the named tensors with probability `frac`
    (at least one value each): a fraction `frac` of distinct values, where
    `frac * numel` indices drawn with replacement would change 39% at
    50%."""
    for n in names:
        flat = state[n].view(-1)
        pick = torch.rand(flat.numel(), generator=gen) < frac
        pick[torch.randint(0, flat.numel(), (1,), generator=gen)] = True
        # More than one bf16 ulp at any magnitude: the bytes change.
        flat[pick] = flat[pick] * 1.03 + 0.01


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(a.model_dir)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    state = model.state_dict()  # Tied: the head is the embedding.
    names = [n for n in state if n != "lm_head.weight"]
    layers = 1 + max(int(n.split(".")[2]) for n in names
                     if n.startswith("model.layers."))
    kinds = {
        "values 1%": names,
        "frozen emb": [n for n in names if "embed_tokens" not in n],
        "last 4": [n for n in names if n.startswith("model.layers.")
                   and int(n.split(".")[2]) >= layers - 4],
    }
    gen = torch.Generator().manual_seed(1)
    out = {"model_mb": 0.0, "rows": []}
    step = 0
    with EngineSync([a.url], delta=False) as full_sync, \
            EngineSync([a.url]) as delta_sync:
        for kind, touched in kinds.items():
            rows = {"full": [], "delta": [], "write": [], "tensors": [],
                    "bytes": [], "full_engine": [], "delta_engine": [],
                    "full_write": []}
            for _ in range(a.reps):
                step += 1
                # The engine at the current state through the delta sync,
                # then the change, pushed both ways.
                delta_sync.push(state, step)
                change(state, touched, 0.01, gen)
                step += 1
                time.sleep(IDLE_S)
                r = delta_sync.push(state, step)
                assert r.engines[0].mode == "delta", r
                rows["delta"].append(r.seconds)
                rows["write"].append(r.write_seconds)
                rows["delta_engine"].append(r.engines[0].seconds)
                rows["tensors"].append(r.engines[0].tensors)
                rows["bytes"].append(r.engines[0].bytes)
                step += 1
                time.sleep(IDLE_S)
                t0 = time.perf_counter()
                f = full_sync.push(state, step)
                rows["full"].append(time.perf_counter() - t0)
                rows["full_engine"].append(f.engines[0].seconds)
                rows["full_write"].append(f.write_seconds)
                out["model_mb"] = r.model_bytes / 2**20
            out["rows"].append({
                "kind": kind, "tensors": r.tensors,
                "changed_tensors": statistics.median(rows["tensors"]),
                "changed_mb": statistics.median(rows["bytes"]) / 2**20,
                "full_s": statistics.median(rows["full"]),
                "delta_s": statistics.median(rows["delta"]),
                "delta_write_s": statistics.median(rows["write"]),
                "delta_engine_s": statistics.median(rows["delta_engine"]),
                "full_write_s": statistics.median(rows["full_write"]),
                "full_engine_s": statistics.median(rows["full_engine"])})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
