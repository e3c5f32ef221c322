#!/usr/bin/env python3
"""Reference forward of a Hugging Face Llama / Qwen2 / Qwen3 directory.

An independent check of hy's decoder (trainer/model.cc): the math below is
transcribed from transformers (models/llama/modeling_llama.py,
models/qwen2/modeling_qwen2.py, models/qwen3/modeling_qwen3.py,
modeling_rope_utils.py: _compute_default_rope_parameters and
_compute_llama3_parameters), written with plain torch ops in the shape of
that code (repeat_kv, rotate_half, eager attention), not of hy's.

Usage: hf_reference.py MODEL_DIR INPUT_JSON OUT_BIN [--ignore FEATURE]
INPUT_JSON: {"tokens": [[...]], "positions": [[...]]} (one row, no padding).
Writes the logits [T, vocab] as little-endian f32. --ignore drops one
feature (qkv_bias, o_bias, qk_norm, tie, rope_scaling, head_dim) to show a
test that compares against this one would notice hy ignoring it.
"""
import json
import math
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = bytearray(data[base + b : base + e])
        t = torch.frombuffer(buf, dtype=DTYPES[info["dtype"]]) if buf else (
            torch.empty(0, dtype=DTYPES[info["dtype"]]))
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def load_weights(model_dir):
    try:
        with open(model_dir + "/model.safetensors.index.json") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    except FileNotFoundError:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(model_dir + "/" + f))
    return w


def rope_inv_freq(cfg, head_dim, ignore):
    # _compute_default_rope_parameters
    base = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (
        base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rs = cfg.get("rope_scaling")
    if not rs or ignore == "rope_scaling":
        return inv_freq
    assert rs.get("rope_type", rs.get("type")) == "llama3"
    # _compute_llama3_parameters
    factor = rs["factor"]
    low_freq_factor = rs["low_freq_factor"]
    high_freq_factor = rs["high_freq_factor"]
    old_context_len = rs["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(h, n_rep):
    b, kvh, s, d = h.shape
    if n_rep == 1:
        return h
    h = h[:, :, None, :, :].expand(b, kvh, n_rep, s, d)
    return h.reshape(b, kvh * n_rep, s, d)


def forward(model_dir, tokens, positions, ignore):
    cfg = json.load(open(model_dir + "/config.json"))
    arch = cfg["architectures"][0]
    w = load_weights(model_dir)
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    if ignore == "head_dim":
        head_dim = cfg["hidden_size"] // heads
    eps = cfg["rms_norm_eps"]
    if arch == "Qwen2ForCausalLM":
        qkv_bias, o_bias = True, False
    else:
        qkv_bias = o_bias = cfg.get("attention_bias", False)
    qkv_bias = qkv_bias and ignore != "qkv_bias"
    o_bias = o_bias and ignore != "o_bias"
    qk_norm = arch == "Qwen3ForCausalLM" and ignore != "qk_norm"
    mlp_bias = cfg.get("mlp_bias", False)

    def lin(x, name, bias):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if bias else y

    ids = torch.tensor(tokens)
    pos = torch.tensor(positions, dtype=torch.float32)
    b, s = ids.shape
    x = w["model.embed_tokens.weight"][ids]
    inv_freq = rope_inv_freq(cfg, head_dim, ignore)
    freqs = (inv_freq[None, :, None] @ pos[:, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    mask = torch.full((s, s), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj", qkv_bias).view(b, s, -1, head_dim)
        k = lin(h, p + "self_attn.k_proj", qkv_bias).view(b, s, -1, head_dim)
        v = lin(h, p + "self_attn.v_proj", qkv_bias).view(b, s, -1, head_dim)
        if qk_norm:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, heads // kv_heads)
        v = repeat_kv(v, heads // kv_heads)
        scores = q @ k.transpose(2, 3) * head_dim ** -0.5 + mask
        attn = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, -1)
        x = x + lin(attn, p + "self_attn.o_proj", o_bias)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(lin(h, p + "mlp.gate_proj", mlp_bias))
        x = x + lin(gate * lin(h, p + "mlp.up_proj", mlp_bias), p + "mlp.down_proj", mlp_bias)
    x = rms_norm(x, w["model.norm.weight"], eps)
    tied = cfg.get("tie_word_embeddings", False)
    if ignore == "tie" and tied:
        tied = False
        w.setdefault("lm_head.weight", torch.zeros_like(w["model.embed_tokens.weight"]))
    head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return (x @ head.T)[0]


def main():
    args = sys.argv[1:]
    ignore = None
    if "--ignore" in args:
        i = args.index("--ignore")
        ignore = args[i + 1]
        del args[i : i + 2]
    model_dir, input_json, out = args
    inp = json.load(open(input_json))
    with torch.no_grad():
        logits = forward(model_dir, inp["tokens"], inp["positions"], ignore)
    with open(out, "wb") as f:
        f.write(logits.contiguous().to(torch.float32).numpy().tobytes())


if __name__ == "__main__":
    main()
