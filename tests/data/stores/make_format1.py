"""Writes tests/data/stores/format1: a store made by hystate 0.x before
chunk format 2 (build/python-installed of 9f12677), and the sha256 of each
tensor's bytes per step, computed by hashlib over numpy's bytes."""
import hashlib, json, sys
import torch
import hystate
out = sys.argv[1]
torch.manual_seed(53)
state = {
    "w": torch.randn(256, 1024) * 0.02,
    "b": (torch.randn(256, 1024) * 0.02).to(torch.bfloat16),
    "m": torch.randn(128, 1024).abs() * 1e-3,
    "idx": torch.randint(0, 1 << 40, (4097,), dtype=torch.int64),
    "mask": torch.randint(0, 255, (1001,), dtype=torch.uint8),
    "odd": torch.randn(777),
}
sums = {}
for step in (1, 2):
    if step == 2:
        state["w"][:3] += 1e-3
        state["b"][:3] += 1
        state["odd"][5] = 7.0
    hystate.save(out, state, step=step, chunk_bytes=256 * 1024)
    sums[step] = {k: hashlib.sha256(v.view(torch.uint8).numpy().tobytes()
                                    if v.dtype == torch.bfloat16 else
                                    v.numpy().tobytes()).hexdigest()
                  for k, v in state.items()}
json.dump({"writer": "hystate at 9f12677 (chunk format 1)",
           "dtypes": {k: str(v.dtype) for k, v in state.items()},
           "shapes": {k: list(v.shape) for k, v in state.items()},
           "sha256": sums}, open(out + ".json", "w"), indent=1)
