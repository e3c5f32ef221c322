"""Plain PyTorch's side of bench/real_model_bench.py: one update step of a
Hugging Face model as a PyTorch user writes it, and torch.save of its state.

    python bench/real_model_torch.py MODEL_DIR BATCH.json [--fsdp2] [--save DIR]

MODEL_DIR loads with transformers (float32). BATCH.json (written by the
bench): {"sequences": [[ids...]...], "prompt_lengths": [...],
"advantages": [...], "mini_batch": 32, "lr": 2e-5, "reps": 3}: every
sequence is a prompt followed by its response. One update step is what
hy's GRPO update does with the same batch: for each mini-batch, the
token-mean policy-gradient loss on the response tokens (-A * log-prob),
backward, AdamW; the step's time is the median of `reps` after one warm-up.
Without --fsdp2 one process trains the whole batch. With --fsdp2 (run under
torchrun, Gloo) FSDP2's fully_shard wraps each decoder layer and the root,
and each rank trains its half of every mini-batch. --save DIR: then
torch.save of the model's and AdamW's state dicts (weights and both Adam
moments) into DIR, timed, and its size. Prints one JSON object (rank 0).
"""

import argparse
import json
import os
import resource
import statistics
import time

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def batch_tensors(b, rows):
    seqs = [b["sequences"][i] for i in rows]
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    attn = torch.zeros(len(seqs), width, dtype=torch.long)
    resp = torch.zeros(len(seqs), width, dtype=torch.bool)
    for k, (i, s) in enumerate(zip(rows, seqs)):
        pad = width - len(s)  # Left padding, as a rollout batch has it.
        ids[k, pad:] = torch.tensor(s)
        attn[k, pad:] = 1
        resp[k, pad + b["prompt_lengths"][i]:] = True
    adv = torch.tensor([b["advantages"][i] for i in rows])
    return ids, attn, resp, adv


def loss_fn(model, ids, attn, resp, adv, tokens):
    pos = (attn.cumsum(1) - 1).clamp_min(0)
    logits = model(input_ids=ids, attention_mask=attn,
                   position_ids=pos).logits[:, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(
        -1, ids[:, 1:, None]).squeeze(-1)
    mask = resp[:, 1:].float()
    return -(adv[:, None] * logp * mask).sum() / tokens


def step(model, opt, b, rank, world):
    n = len(b["sequences"])
    mb = b["mini_batch"]
    for begin in range(0, n, mb):
        rows = list(range(begin, min(n, begin + mb)))
        tokens = sum(len(b["sequences"][i]) - b["prompt_lengths"][i]
                     for i in rows)
        mine = rows[rank::world]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, *batch_tensors(b, mine), tokens)
        loss.backward()
        opt.step()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("batch")
    ap.add_argument("--fsdp2", action="store_true")
    ap.add_argument("--save")
    a = ap.parse_args()
    with open(a.batch) as f:
        b = json.load(f)
    rank, world = 0, 1
    if a.fsdp2:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir,
                                                 dtype=torch.float32)
    model.train()
    if a.fsdp2:
        from torch.distributed.fsdp import fully_shard
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=b["lr"])
    times = []
    for rep in range(b["reps"] + 1):
        if a.fsdp2:
            dist.barrier()
        t0 = time.perf_counter()
        step(model, opt, b, rank, world)
        if a.fsdp2:
            dist.barrier()
        if rep > 0:
            times.append(time.perf_counter() - t0)
    out = {"mode": "fsdp2" if a.fsdp2 else "single", "world_size": world,
           "step_s": statistics.median(times), "step_s_all": times}
    if a.save and not a.fsdp2:
        os.makedirs(a.save, exist_ok=True)
        path = os.path.join(a.save, "state.pt")
        t0 = time.perf_counter()
        torch.save({"model": model.state_dict(),
                    "optimizer": opt.state_dict()}, path)
        out["save_s"] = time.perf_counter() - t0
        out["save_bytes"] = os.path.getsize(path)
    rss = [peak_rss_mb()]
    if a.fsdp2:
        got = [None] * world
        dist.all_gather_object(got, rss[0])
        rss = got
        dist.destroy_process_group()
    out["peak_rss_mb"] = rss
    if rank == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
