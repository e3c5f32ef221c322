#!/usr/bin/env python3
"""transformers' own answers for hf_model_test.cc.

Usage: hf_transformers_reference.py OUT_DIR INPUT_JSON
INPUT_JSON: {"prompts": [[ids...], ...], "new_tokens": N,
             "cases": [{"name": CASE, "drop": FEATURE or ""}, ...]}

For each case (one process for all: importing torch and transformers is
most of the time), builds the tiny random-weight model CASE from
transformers' config class (seeded; norms, biases and every matrix drawn so
that each feature changes the output), writes it with save_pretrained to
OUT_DIR/CASE/model (sharded, with model.safetensors.index.json), loads it
back with AutoModelForCausalLM.from_pretrained in float32 with eager
attention, and writes OUT_DIR/CASE/reference.json:
  "logits":  per prompt, that prompt alone (no padding): [len][vocab];
  "greedy":  per prompt, generate(do_sample=False) of exactly N new tokens;
  "ablated": with a FEATURE, "logits" again with it taken out of the loaded
             model: qkv_bias / o_bias (zeroed), qk_norm (identity),
             rope_scaling (the config's rope_parameters back to default).
Needs transformers >= 5 (rope_parameters, dtype=).
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

SEED = 7
SMALL = dict(vocab_size=48, hidden_size=32, intermediate_size=40,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=256, rms_norm_eps=1e-6,
             bos_token_id=None, eos_token_id=None, pad_token_id=None)
DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 500.0}
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16}

# name: (config class, extra config fields, dtype saved).
CASES = {
    "llama": ("LlamaConfig", {}, torch.float32),
    "qwen2_qkv_bias_tied": ("Qwen2Config", {"tie_word_embeddings": True},
                            torch.float32),
    "llama_tied": ("LlamaConfig", {"tie_word_embeddings": True},
                   torch.float32),
    "llama_attention_bias": ("LlamaConfig", {"attention_bias": True},
                             torch.float32),
    "qwen3_head_dim": ("Qwen3Config", {"head_dim": 16}, torch.float32),
    "llama3_rope_scaling": ("LlamaConfig", {"rope_parameters": LLAMA3_ROPE},
                            torch.float32),
    "qwen3_bf16_tied": ("Qwen3Config", {"tie_word_embeddings": True},
                        torch.bfloat16),
}


def build(case):
    cls, extra, dtype = CASES[case]
    fields = {**SMALL, "rope_parameters": DEFAULT_ROPE, **extra}
    config = getattr(transformers, cls)(**fields)
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=g)
            if "norm" in name:
                p.copy_(1.0 + 0.3 * n)  # RMSNorm weights around 1.
            elif name.endswith(".bias"):
                p.copy_(0.5 * n)
            else:
                p.copy_(0.2 * n)
    return model.to(dtype)


def drop(model, feature):
    """Takes `feature` out of the loaded model, in place or by reloading."""
    layers = model.model.layers
    if feature == "qkv_bias":
        for l in layers:
            for proj in (l.self_attn.q_proj, l.self_attn.k_proj,
                         l.self_attn.v_proj):
                proj.bias.data.zero_()
    elif feature == "o_bias":
        for l in layers:
            l.self_attn.o_proj.bias.data.zero_()
    elif feature == "qk_norm":
        for l in layers:
            l.self_attn.q_norm = torch.nn.Identity()
            l.self_attn.k_norm = torch.nn.Identity()
    elif feature == "rope_scaling":
        config = model.config
        config.rope_parameters = dict(DEFAULT_ROPE)
        return load(model.name_or_path, config=config)
    else:
        sys.exit(f"unknown feature to drop: {feature}")
    return model


def load(path, **kwargs):
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", **kwargs)
    return model.eval()


def logits(model, prompts):
    with torch.no_grad():
        return [model(torch.tensor([p])).logits[0].tolist() for p in prompts]


def greedy(model, prompts, n):
    out = []
    for p in prompts:
        ids = torch.tensor([p])
        seq = model.generate(ids, attention_mask=torch.ones_like(ids),
                             do_sample=False, max_new_tokens=n,
                             min_new_tokens=n, eos_token_id=None,
                             pad_token_id=0)
        out.append(seq[0, len(p):].tolist())
    return out


def main():
    out_dir, input_json = sys.argv[1:]
    with open(input_json) as f:
        inp = json.load(f)
    prompts = inp["prompts"]
    for case in inp["cases"]:
        case_dir = os.path.join(out_dir, case["name"])
        model_dir = os.path.join(case_dir, "model")
        build(case["name"]).save_pretrained(model_dir, max_shard_size="20KB")
        model = load(model_dir)
        ref = {"logits": logits(model, prompts),
               "greedy": greedy(model, prompts, inp["new_tokens"])}
        if case["drop"]:
            ref["ablated"] = logits(drop(model, case["drop"]), prompts)
        with open(os.path.join(case_dir, "reference.json"), "w") as f:
            json.dump(ref, f)


if __name__ == "__main__":
    main()
