"""Held-out strict exact match of a Hugging Face directory, by transformers.

    python scripts/lib/score_hf.py MODEL_DIR PROMPTS.jsonl [--max-new-tokens N] [--json]

PROMPTS.jsonl: `hyctl data gen-arith --chat` records ({"prompt": messages,
"answer": "98"}). Each prompt is rendered with the model's own chat
template (apply_chat_template, generation prompt added), decoded greedily
in float32 (batched, left-padded, as generate does), cut after the first
end-of-sequence id (the tokenizer's and generation_config.json's), and
scored strictly as hy's `strict` reward does: the response ended and its
text, stripped, is the answer and nothing else. Prints the rate (or one
JSON object with --json). Independent of hy: what scripts/demo-real.sh
reports as the score of its export.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.utils import logging  # noqa: E402

logging.disable_progress_bar()


def eos_ids(tok, model):
    ids = {tok.eos_token_id}
    g = model.generation_config.eos_token_id
    ids |= set(g if isinstance(g, list) else [g])
    return {i for i in ids if i is not None}


def score(model_dir, records, max_new_tokens, batch=64):
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir,
                                                 dtype=torch.float32).eval()
    eos = eos_ids(tok, model)
    exact = 0
    for b in range(0, len(records), batch):
        chunk = records[b:b + batch]
        texts = [tok.apply_chat_template(r["prompt"], tokenize=False,
                                         add_generation_prompt=True)
                 for r in chunk]
        enc = tok(texts, return_tensors="pt", padding=True,
                  add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens,
                                 do_sample=False,
                                 pad_token_id=tok.pad_token_id)
        for r, row in zip(chunk, out[:, enc["input_ids"].shape[1]:].tolist()):
            cut = next((k for k, t in enumerate(row) if t in eos), None)
            if cut is None:
                continue  # Never ended: not the answer alone.
            text = tok.decode(row[:cut], skip_special_tokens=True)
            exact += text.strip() == r["answer"]
    return exact / max(len(records), 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("prompts")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with open(a.prompts) as f:
        records = [json.loads(line) for line in f if line.strip()]
    rate = score(a.model_dir, records, a.max_new_tokens)
    if a.json:
        print(json.dumps({"model": a.model_dir, "prompts": len(records),
                          "strict_exact_match": rate}))
    else:
        print(f"held-out strict exact match {rate:.3f} over {len(records)} "
              f"prompts (transformers, greedy, float32): {a.model_dir}")


if __name__ == "__main__":
    sys.exit(main())
