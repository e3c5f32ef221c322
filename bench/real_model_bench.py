"""The real-model job's speed, side by side in one run: hy against
transformers, vLLM and plain PyTorch on SmolLM2-135M-Instruct.

    .venv/bin/python bench/real_model_bench.py [--model DIR] [--json] [--quick]

Rows (measured one after another, on this machine, in this run):

  rollout     tokens/s of greedy decoding (median of 3), float32, the
              same 64 chat prompts
              (`hyctl data gen-arith --chat --max-digits 2`, token ids as
              hy renders them), up to 16 new tokens, each response ending
              at its end-of-sequence token: hy's decoder (`hyctl eval`, its
              generate_seconds), transformers' `generate` (batched, left
              padded) and vLLM (hy_vllm.serve on the model's real weights,
              one /v1/completions request for all prompts); the engine's
              start apart.
  update      one update step of configs/real-smollm2.yaml's batch (16
              prompts x 4 samples, 8-token responses, 2 mini-batches of
              32): hy (`hyctl train`, 2 ranks, FSDP, its train_ms, median
              of the iterations after the first; 2 SFT steps before them)
              against plain PyTorch
              (bench/real_model_torch.py: transformers' model, AdamW,
              the same sequences) in 1 process and in 2 with FSDP2
              (torchrun, Gloo).
  sync        hy's weight sync into a vLLM engine per iteration (`hyctl
              train --rollout-engine vllm`, weight_sync_ms, float32 engine
              as the default bf16 one: its rollout.vllm.dtype) against one
              memcpy of the model's bf16 weights.
  checkpoint  hy's checkpoint per step (blocking time: checkpoint_ms; size:
              the last step in the ranks' primary stores, stored alone and
              what it added on disk) against torch.save of the model's and
              AdamW's state (weights and both Adam moments, one process).
              hy's step also holds the frozen reference (needed to resume).
  memory      peak RSS per rank against the model's f32 bytes.

A table (markdown), or one JSON object with --json. --quick: fewer
iterations and prompts (to check the bench runs, not to measure).
Needs the build (HYCTL, default build/bin/hyctl), .venv-vllm and the
model (scripts/fetch-model.sh smollm2-135m-instruct).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging

SRC = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SRC / "python"))
from hy_vllm import serve  # noqa: E402  (imports no vLLM)

logging.disable_progress_bar()
HYCTL = os.environ.get("HYCTL", str(SRC / "build" / "bin" / "hyctl"))
VLLM_PYTHON = os.environ.get("HY_VLLM_PYTHON",
                             str(SRC / ".venv-vllm" / "bin" / "python3"))
CONFIG = SRC / "configs" / "real-smollm2.yaml"


def run(*args, env=None):
    p = subprocess.run([str(a) for a in args], capture_output=True,
                       text=True, env=env, cwd=SRC)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} exited {p.returncode}:\n"
                 f"{p.stderr[-3000:]}")
    return p.stdout


def json_lines(text, key):
    return [json.loads(l) for l in text.splitlines()
            if l.startswith('{"' + key + '"')]


def rollout_rows(model, work, n_prompts, new_tokens, reps=3):
    prompts = work / "rollout.jsonl"
    run(HYCTL, "data", "gen-arith", prompts, "--chat", "--count", n_prompts,
        "--seed", 5, "--ops", "+", "--max-digits", 2)
    samples = work / "hy-samples.jsonl"
    hy_s = []
    for _ in range(reps):
        rep = json.loads(run(HYCTL, "eval", model, prompts, "--dtype",
                             "float32", "--max-new-tokens", new_tokens,
                             "--batch-size", n_prompts, "--samples", samples,
                             "-o", "json").splitlines()[-1])
        hy_s.append(rep["generate_seconds"])
    ss = [json.loads(l) for l in samples.read_text().splitlines()]
    ids = [s["prompt_ids"] for s in ss]
    rows = {"hy": {"tokens": rep["new_tokens"],
                   "seconds": statistics.median(hy_s), "seconds_all": hy_s}}

    # transformers: the same ids, left-padded, greedy, float32.
    m = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    m.eval()
    eos = set(m.generation_config.eos_token_id
              if isinstance(m.generation_config.eos_token_id, list)
              else [m.generation_config.eos_token_id])
    width = max(map(len, ids))
    inp = torch.full((len(ids), width), 0, dtype=torch.long)
    att = torch.zeros((len(ids), width), dtype=torch.long)
    for i, p in enumerate(ids):
        inp[i, width - len(p):] = torch.tensor(p)
        att[i, width - len(p):] = 1
    tf_s = []
    with torch.no_grad():
        for _ in range(reps):
            t0 = time.perf_counter()
            out = m.generate(input_ids=inp, attention_mask=att,
                             max_new_tokens=new_tokens, do_sample=False,
                             pad_token_id=0)
            tf_s.append(time.perf_counter() - t0)
    count, same = 0, 0
    for i, row in enumerate(out[:, width:].tolist()):
        cut = next((k + 1 for k, t in enumerate(row) if t in eos), len(row))
        count += cut
        same += row[:cut] == ss[i]["response_ids"]
    rows["transformers"] = {"tokens": count,
                            "seconds": statistics.median(tf_s),
                            "seconds_all": tf_s}
    rows["params"] = sum(p.numel() for p in m.parameters())
    del m

    # vLLM: the model's real weights, one request for every prompt.
    eng = serve.Engine(model, work / "vllm-rollout.log", dtype="float32",
                       dummy=False, python=VLLM_PYTHON, max_model_len=256)
    try:
        body = {"model": "hy", "prompt": ids, "max_tokens": new_tokens,
                "temperature": 0, "return_token_ids": True}
        eng.request("/v1/completions", dict(body, prompt=ids[:2]))  # Warm.
        v_s = []
        for _ in range(reps):
            t0 = time.perf_counter()
            c = eng.request("/v1/completions", body, timeout=600)
            v_s.append(time.perf_counter() - t0)
        got = sorted(c["choices"], key=lambda ch: ch["index"])
        count = sum(len(ch["token_ids"]) for ch in got)
        vsame = sum(ch["token_ids"] == s["response_ids"]
                    for ch, s in zip(got, ss))
        rows["vllm"] = {"tokens": count, "seconds": statistics.median(v_s),
                        "seconds_all": v_s, "start_s": eng.start_s}
    finally:
        eng.close()
    for k in ("hy", "transformers", "vllm"):
        r = rows[k]
        r["tokens_per_s"] = r["tokens"] / r["seconds"]
    rows["same_as_hy"] = {"transformers": same, "vllm": vsame,
                          "prompts": len(ids)}
    return rows, ss


def train_rows(model, work, iterations, extra=()):
    data = work / "train.jsonl"
    if not data.exists():
        run(HYCTL, "data", "gen-arith", data, "--chat", "--count", 2000,
            "--seed", 1, "--ops", "+", "--max-digits", 2)
    store = work / ("store-" + ("vllm" if extra else "hy"))
    t0 = time.time()
    out = run(HYCTL, "train", "--config", CONFIG, "--model", model,
              "--data", data, "--store", store, "--iterations", iterations,
              # 2 SFT steps first: weights off the bf16 grid the model
              # came in, Adam moments set, as in any real step.
              "--set", "trainer.sft_steps=2", "--set",
              "checkpoint.save_every=1", "--set", "checkpoint.keep_last=100",
              "--set", "data.reward=exact_match", "-o", "json", *extra)
    its = json_lines(out, "iteration")
    later = its[1:] or its
    med = lambda k: statistics.median(j[k] for j in later)  # noqa: E731
    # The last step in the primary stores (node-*/store, one per rank; the
    # replicas double it): its logical bytes (weights, Adam moments, the
    # reference), what it takes stored alone, and what it added on disk
    # (chunks no earlier step holds).
    last = [json.loads(run(HYCTL, "inspect", d, "-o", "json"))[-1]
            for d in sorted(store.glob("node-*/store"))]
    ckpt = {k: sum(v[k] for v in last)
            for k in ("logical_bytes", "stored_bytes", "new_bytes")}
    return {"iterations": len(its), "wall_s": time.time() - t0,
            "iteration_ms": med("iteration_ms"),
            "rollout_ms": med("rollout_ms"), "train_ms": med("train_ms"),
            "checkpoint_ms": med("checkpoint_ms"),
            "weight_sync_ms": med("weight_sync_ms") if extra else None,
            "weight_sync_bytes": med("weight_sync_bytes") if extra else None,
            "peak_rss_mb": max(max(j["peak_rss_mb"]) for j in its),
            "checkpoint": ckpt}


def torch_batch(work, ss, n_seqs=64, response=8):
    """64 sequences of the rollout prompts (repeated) and 8-token
    responses, with GRPO-like advantages: the shape of one hy iteration."""
    g = torch.Generator().manual_seed(0)
    seqs, plens, adv = [], [], []
    for i in range(n_seqs):
        p = ss[i % len(ss)]["prompt_ids"]
        r = torch.randint(100, 40000, (response,), generator=g).tolist()
        seqs.append(p + r)
        plens.append(len(p))
        adv.append(1.0 if i % 2 else -1.0)
    path = work / "batch.json"
    path.write_text(json.dumps({"sequences": seqs, "prompt_lengths": plens,
                                "advantages": adv, "mini_batch": 32,
                                "lr": 2e-5, "reps": 3}))
    return path


def torch_rows(model, work, batch):
    script = SRC / "bench" / "real_model_torch.py"
    single = json.loads(run(sys.executable, script, model, batch, "--save",
                            work / "torch-save").splitlines()[-1])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    fsdp2 = json.loads(run(sys.executable, "-m", "torch.distributed.run",
                           "--nproc-per-node", 2, "--master-port",
                           serve.free_port(), script, model, batch,
                           "--fsdp2", env=env).splitlines()[-1])
    return single, fsdp2


def memcpy_bf16_s(params):
    src = torch.empty(params, dtype=torch.bfloat16).normal_()
    dst = torch.empty_like(src)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


HEADER = ["| row | hy | peer | ratio hy / peer | target |",
          "|---|---|---|---|---|"]


def rollout_lines(ro):
    return [f"| rollout tokens/s (vs {peer}) | {ro['hy']['tokens_per_s']:.1f}"
            f" | {ro[peer]['tokens_per_s']:.1f} | "
            f"{ro['hy']['tokens_per_s'] / ro[peer]['tokens_per_s']:.2f} | "
            f"{'>= 1' if peer == 'transformers' else ''} |"
            for peer in ("transformers", "vllm")]


def rollout_table(ro):
    return "\n".join(HEADER + rollout_lines(ro))


def table(r):
    ro, up, ck = r["rollout"], r["update"], r["checkpoint"]
    lines = HEADER + rollout_lines(ro)
    for peer in ("torch_single", "torch_fsdp2"):
        lines.append(
            f"| update step s (vs {peer}) | {up['hy_s']:.2f} | "
            f"{up[peer]['step_s']:.2f} | "
            f"{up['hy_s'] / up[peer]['step_s']:.2f} | <= 1.2 |")
    s = r["sync"]
    lines.append(f"| weight sync into vLLM s (vs memcpy of bf16 weights) | "
                 f"{s['hy_s']:.3f} | {s['memcpy_s']:.3f} | "
                 f"{s['hy_s'] / s['memcpy_s']:.1f} | |")
    lines.append(f"| checkpoint blocking s (vs torch.save) | "
                 f"{ck['hy_blocking_s']:.4f} | {ck['torch_save_s']:.2f} | "
                 f"{ck['hy_blocking_s'] / ck['torch_save_s']:.4f} | "
                 f"<= 10% of an iteration: {ck['blocking_share']:.2%} |")
    st = ck["hy_step"]
    lines.append(f"| checkpoint MB of a step, stored alone (vs torch.save) | "
                 f"{st['stored_bytes'] / 1e6:.0f} | "
                 f"{ck['torch_save_bytes'] / 1e6:.0f} | "
                 f"{st['stored_bytes'] / ck['torch_save_bytes']:.2f} | |")
    lines.append(f"| checkpoint MB a step adds on disk (vs torch.save) | "
                 f"{st['new_bytes'] / 1e6:.0f} | "
                 f"{ck['torch_save_bytes'] / 1e6:.0f} | "
                 f"{st['new_bytes'] / ck['torch_save_bytes']:.2f} | "
                 f"hy's step holds {st['logical_bytes'] / 1e6:.0f} MB: "
                 f"the reference too |")
    m = r["memory"]
    lines.append(f"| peak RSS MB per rank (vs the model's f32 bytes) | "
                 f"{m['hy_peak_rss_mb']:.0f} | {m['model_mb']:.0f} | "
                 f"{m['hy_peak_rss_mb'] / m['model_mb']:.1f} | "
                 f"< 2500 MB |")
    lines.append(f"| peak RSS MB per rank, plain PyTorch 1 process / "
                 f"FSDP2 | | {m['torch_single_mb']:.0f} / "
                 f"{m['torch_fsdp2_mb']:.0f} | | |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.environ.get(
        "HY_MODEL_DIR", str(SRC / "models" / "smollm2-135m-instruct")))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only-rollout", action="store_true",
                    help="the rollout rows alone")
    a = ap.parse_args()
    model = Path(a.model)
    if not (model / "config.json").exists():
        sys.exit(f"{model}: no config.json (scripts/fetch-model.sh "
                 "smollm2-135m-instruct)")
    iters = 2 if a.quick else 4
    with tempfile.TemporaryDirectory(prefix="hy-real-bench-") as tmp:
        work = Path(tmp)
        ro, ss = rollout_rows(model, work, 16 if a.quick else 64, 16)
        if a.only_rollout:
            ro.pop("params")
            print(json.dumps(ro) if a.json else rollout_table(ro))
            return
        hy = train_rows(model, work, iters)
        hv = train_rows(model, work, iters,
                        ("--rollout-engine", "vllm", "--set",
                         "rollout.vllm.dtype=bfloat16"))
        single, fsdp2 = torch_rows(model, work, torch_batch(work, ss))
    params = ro.pop("params")
    r = {"date": time.strftime("%Y-%m-%d"), "model": str(model),
         "params": params, "rollout": ro,
         "update": {"hy_s": hy["train_ms"] / 1e3, "torch_single": single,
                    "torch_fsdp2": fsdp2},
         "sync": {"hy_s": hv["weight_sync_ms"] / 1e3,
                  "hy_bytes": hv["weight_sync_bytes"],
                  "memcpy_s": memcpy_bf16_s(params)},
         "checkpoint": {"hy_blocking_s": hy["checkpoint_ms"] / 1e3,
                        "blocking_share": hy["checkpoint_ms"] /
                        hy["iteration_ms"],
                        "hy_step": hy["checkpoint"],
                        "torch_save_s": single["save_s"],
                        "torch_save_bytes": single["save_bytes"]},
         "memory": {"hy_peak_rss_mb": hy["peak_rss_mb"],
                    "hy_vllm_peak_rss_mb": hv["peak_rss_mb"],
                    "model_mb": params * 4 / 1e6,
                    "torch_single_mb": max(single["peak_rss_mb"]),
                    "torch_fsdp2_mb": max(fsdp2["peak_rss_mb"])},
         "iterations": {"hy": hy, "vllm": hv}}
    if a.json:
        print(json.dumps(r))
    else:
        print(table(r))
        print(f"\niteration s (median, hy rollout / vLLM rollout): "
              f"{hy['iteration_ms'] / 1e3:.1f} / {hv['iteration_ms'] / 1e3:.1f}"
              f"; rollout phase s: {hy['rollout_ms'] / 1e3:.1f} / "
              f"{hv['rollout_ms'] / 1e3:.1f}")
        print(f"greedy responses equal to hy's: transformers "
              f"{ro['same_as_hy']['transformers']}/{ro['same_as_hy']['prompts']}"
              f", vLLM {ro['same_as_hy']['vllm']}/{ro['same_as_hy']['prompts']}"
              f"; vLLM start {ro['vllm']['start_s']:.0f} s")


if __name__ == "__main__":
    main()
