"""Run inside a plain root (only Python, pip and the hystate wheel): the
package imports without any -dev package, saves, loads, loads under another
sharding (what a reshard is for hystate.load), plans a reshard and verifies."""

import os
import tempfile

import numpy as np

import hystate

d = tempfile.mkdtemp()
rng = np.random.default_rng(0)
q = rng.standard_normal((16, 16)).astype(np.float32)
state = {"model.layers.0.self_attn.q_proj.weight": q,
         "model.norm.weight": np.zeros(16, np.float32), "note": "plain root"}
for step in (1, 2):
    state["model.norm.weight"] = state["model.norm.weight"] + 1
    assert hystate.save(d, state, step=step) == step
cp = hystate.open(d)
assert cp.steps() == [1, 2], cp.steps()
back = {k: np.zeros_like(v) if isinstance(v, np.ndarray) else None
        for k, v in state.items()}
assert hystate.load(d, back, step=2) == 2
for k, v in state.items():
    assert np.array_equal(back[k], v) if isinstance(v, np.ndarray) else \
        back[k] == v, k
# Another sharding: two ranks' rows of q, each read on its own.
for lo in (0, 8):
    rows = np.zeros((8, 16), np.float32)
    hystate.load(d, {"model.layers.0.self_attn.q_proj.weight":
                     hystate.Shard(rows, [lo, 0], [16, 16])}, step=1)
    assert np.array_equal(rows, q[lo:lo + 8]), lo
plan = hystate.plan(d, "fsdp=2", "tp=2")
assert plan, plan
checked = cp.verify()
chunks = sum(n for s in checked.values() for n in s.values())
assert chunks > 0, checked
print(f"ok: hystate {hystate.__version__} from "
      f"{os.path.dirname(hystate._hy.__file__)}; steps {cp.steps()}, "
      f"{chunks} chunks verified")
