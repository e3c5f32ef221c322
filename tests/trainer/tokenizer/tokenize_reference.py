"""Reference for hy's tokenizer tests and benchmark: Hugging Face's Rust
implementation (PyPI `tokenizers`) and transformers' chat templates.

  tokenize_reference.py encode TOKENIZER_JSON IN OUT
    IN: JSON Lines, one JSON string each. OUT: one line per input,
    {"plain": [ids without special tokens], "special": [ids with],
     "nfc": the input as the tokenizer's own normalizer leaves it (its
     NFC, whose tables are Unicode 9.0's, not Python's unicodedata; the
     input unchanged when it has none), "decode": decode(special),
     "decode_skip": decode(special, skip_special_tokens=True)}.
  tokenize_reference.py decode TOKENIZER_JSON IN OUT
    IN: JSON Lines, one JSON array of ids each. OUT: one line per input,
    {"text": decode(ids), "skip": decode(ids, skip_special_tokens=True)}
    (bytes that are not UTF-8 come back as U+FFFD).
  tokenize_reference.py utf8 IN OUT
    IN: JSON Lines, one JSON array of byte values (0-255) each, since a
    JSON string cannot hold invalid UTF-8. OUT: one line per input,
    {"error_at": where Python's strict UTF-8 decoder fails (null if it
    does not), "replaced": the bytes decoded with errors="replace"}.
  tokenize_reference.py bench TOKENIZER_JSON IN REPS
    Encodes IN's strings (encode_batch_fast, add_special_tokens false) once
    to warm up, then REPS times, on one thread; prints the best pass in CPU
    time of the process: {"mb_per_s": ..., "bytes": ..., "seconds": ...,
    "tokens": ...}.
  tokenize_reference.py chat TOKENIZER_DIR IN OUT
    IN: JSON Lines {"messages": [{"role", "content"}...],
    "enable_thinking": bool, "add_generation_prompt": bool (default true)}.
    OUT: one line per input, {"text": what transformers'
    apply_chat_template(..., tokenize=False) renders, "ids": what
    apply_chat_template(..., tokenize=True) gives}.

Exit status 3 when a package is missing.
"""

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def read_lines(path):
    # Split on "\n" only: the JSON may hold raw U+2028 and the like.
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().split("\n") if line]


def load_tokenizer(path):
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        sys.exit(_missing(e))
    return Tokenizer.from_file(path)


def _missing(e):
    print(f"tokenize_reference: {e} (run scripts/install-deps.sh)",
          file=sys.stderr)
    return 3


def encode(tokenizer_path, in_path, out_path):
    tok = load_tokenizer(tokenizer_path)
    texts = read_lines(in_path)
    plain = tok.encode_batch(texts, add_special_tokens=False)
    special = tok.encode_batch(texts, add_special_tokens=True)
    special_ids = [s.ids for s in special]
    decoded = tok.decode_batch(special_ids, skip_special_tokens=False)
    decoded_skip = tok.decode_batch(special_ids, skip_special_tokens=True)
    norm = tok.normalizer
    normalized = [norm.normalize_str(t) for t in texts] if norm else texts
    with open(out_path, "w", encoding="utf-8") as out:
        for p, ids, n, d, ds in zip(plain, special_ids, normalized, decoded,
                                    decoded_skip):
            out.write(json.dumps({"plain": p.ids, "special": ids, "nfc": n,
                                  "decode": d, "decode_skip": ds}))
            out.write("\n")


def decode(tokenizer_path, in_path, out_path):
    tok = load_tokenizer(tokenizer_path)
    ids = read_lines(in_path)
    text = tok.decode_batch(ids, skip_special_tokens=False)
    skip = tok.decode_batch(ids, skip_special_tokens=True)
    with open(out_path, "w", encoding="utf-8") as out:
        for t, s in zip(text, skip):
            out.write(json.dumps({"text": t, "skip": s}) + "\n")


def utf8(in_path, out_path):
    with open(out_path, "w", encoding="utf-8") as out:
        for values in read_lines(in_path):
            data = bytes(values)
            try:
                data.decode("utf-8")
                error_at = None
            except UnicodeDecodeError as e:
                error_at = e.start
            out.write(json.dumps({
                "error_at": error_at,
                "replaced": data.decode("utf-8", errors="replace")}) + "\n")


def bench(tokenizer_path, in_path, reps):
    # One core, as hy_bench_tokenizer measures hy (before the first use).
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    tok = load_tokenizer(tokenizer_path)
    texts = read_lines(in_path)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    tok.encode_batch_fast(texts, add_special_tokens=False)
    best, tokens = float("inf"), 0
    for _ in range(reps):
        start = time.process_time()
        encs = tok.encode_batch_fast(texts, add_special_tokens=False)
        best = min(best, time.process_time() - start)
        tokens = sum(len(e.ids) for e in encs)
    print(json.dumps({"mb_per_s": nbytes / best / 1e6, "bytes": nbytes,
                      "seconds": best, "tokens": tokens}))


def chat(tokenizer_dir, in_path, out_path):
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        sys.exit(_missing(e))
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    with open(out_path, "w", encoding="utf-8") as out:
        for case in read_lines(in_path):
            kwargs = dict(
                add_generation_prompt=case.get("add_generation_prompt", True),
                enable_thinking=case["enable_thinking"])
            text = tok.apply_chat_template(case["messages"], tokenize=False,
                                           **kwargs)
            ids = tok.apply_chat_template(case["messages"], tokenize=True,
                                          return_dict=False, **kwargs)
            out.write(json.dumps({"text": text, "ids": ids}) + "\n")


def main(argv):
    if len(argv) == 5 and argv[1] == "encode":
        encode(argv[2], argv[3], argv[4])
    elif len(argv) == 5 and argv[1] == "decode":
        decode(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "utf8":
        utf8(argv[2], argv[3])
    elif len(argv) == 5 and argv[1] == "bench":
        bench(argv[2], argv[3], max(1, int(argv[4])))
    elif len(argv) == 5 and argv[1] == "chat":
        chat(argv[2], argv[3], argv[4])
    else:
        print("usage: tokenize_reference.py encode TOKENIZER_JSON IN OUT | "
              "decode TOKENIZER_JSON IN OUT | utf8 IN OUT | "
              "bench TOKENIZER_JSON IN REPS | chat TOKENIZER_DIR IN OUT",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
