"""The ranks of test_vllm_sync.py's FSDP2 test, run under torchrun:

    torchrun --nproc-per-node 2 vllm_sync_ranks.py MODEL OUT URL [MODE]

A Hugging Face Qwen3 model from MODEL (float32) wrapped with PyTorch's
FSDP2 (fully_shard per decoder layer and at the root: DTensor parameters
sharded over the 2 ranks, gloo on CPU) trains STEPS (3) AdamW steps on
random tokens. Layer 0 and the (tied) embedding are frozen, as in a
partial fine-tune, so some tensors never change. After each step every
rank calls hystate.vllm.EngineSync.push with the sharded state dict (the
key is $HY_VLLM_API_KEY); rank 0 then records the push's report, the
engine's greedy tokens and their log-probs for PROMPTS, and the full weights as a Hugging Face
directory (OUT/step-<k>, from DTensor.full_tensor: the test's reference,
made by PyTorch, not by hy), in OUT/steps.jsonl.

MODE "sparse" replaces the optimizer step by a change of 1% of the values
of two of layer 1's tensors (q_proj, down_proj), as a low learning rate
leaves most bf16 values as they were: what a rank on another host sends
is then index/value pairs.
"""

import dataclasses
import json
import os
import sys
import urllib.request
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from transformers import AutoModelForCausalLM

from hystate.vllm import EngineSync

STEPS = 3
SPARSE = ["model.layers.1.self_attn.q_proj.weight",
          "model.layers.1.mlp.down_proj.weight"]
PROMPTS = [[257, 49, 43, 50, 61], [257, 55, 43, 57, 61], [257, 51, 43, 51, 61]]


def greedy(url, key, prompt, n=6):
    body = json.dumps({"model": "hy", "prompt": prompt, "max_tokens": n,
                       "temperature": 0, "return_token_ids": True,
                       "logprobs": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(
        url + "/v1/completions", data=body, method="POST",
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=120) as r:
        c = json.loads(r.read())["choices"][0]
    return c["token_ids"], c["logprobs"]["token_logprobs"]


def main():
    model_dir, out, url = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "train"
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir,
                                                 dtype=torch.float32)
    frozen = [model.model.layers[0], model.model.embed_tokens]
    for m in frozen:
        for p in m.parameters():
            p.requires_grad_(False)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    assert all(isinstance(p, DTensor) for p in model.parameters())
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                            lr=1e-3)
    sync = EngineSync([url], dtype="float32")
    gen = torch.Generator().manual_seed(100 + rank)
    log = []
    for step in range(1, STEPS + 1):
        ids = torch.randint(0, 256, (4, 12), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        if mode == "sparse":
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name in SPARSE:
                    local = params[name].to_local()
                    local[torch.rand(local.shape, generator=gen) < 0.01] += 0.05
        else:
            loss.backward()
            opt.step()
            opt.zero_grad()
        report = sync.push(model.state_dict(), step)
        full = {k: v.full_tensor() if isinstance(v, DTensor) else v
                for k, v in model.state_dict().items()}
        if rank == 0:
            key = os.environ["HY_VLLM_API_KEY"]
            ref = AutoModelForCausalLM.from_pretrained(model_dir,
                                                       dtype=torch.float32)
            ref.load_state_dict(full)
            ref.save_pretrained(out / f"step-{step}")
            log.append({"step": step, "report": dataclasses.asdict(report),
                        "engine": [greedy(url, key, p) for p in PROMPTS],
                        "loss": loss.item()})
        dist.barrier()
    sync.close()
    if rank == 0:
        with open(out / "steps.jsonl", "w") as f:
            for r in log:
                f.write(json.dumps(r) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
